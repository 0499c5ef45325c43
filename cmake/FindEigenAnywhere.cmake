# Eigen3 (headers only; the procedural data generators use it), found without root:
#   1. the system's or any copy on CMAKE_PREFIX_PATH (Debian's libeigen3-dev, a cluster module, conda);
#   2. else the one pip installs (the cmeel-eigen wheel, a build requirement and in requirements.txt),
#      under <site-packages>/cmeel.prefix of the Python the build runs.
# Defines Eigen3::Eigen and VT_EIGEN_SOURCE ("system" or "pip") with VT_EIGEN_DIR.
# Needs Python_EXECUTABLE (find_package(Python ...) first).
find_package(Eigen3 3.3 QUIET NO_MODULE)
if(Eigen3_FOUND)
  set(VT_EIGEN_SOURCE "system")
else()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import pathlib, cmeel; print(pathlib.Path(cmeel.__file__).resolve().parent.parent / 'cmeel.prefix')"
    OUTPUT_VARIABLE _vt_cmeel_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _vt_cmeel_rc ERROR_QUIET)
  if(NOT _vt_cmeel_rc EQUAL 0)
    message(FATAL_ERROR "vaetransfer: Eigen3 >= 3.3 was not found. Either `pip install cmeel-eigen==3.4.1` into "
                        "${Python_EXECUTABLE}'s environment (no root needed) or install the system package "
                        "(Debian: libeigen3-dev).")
  endif()
  find_package(Eigen3 3.3 REQUIRED NO_MODULE NO_DEFAULT_PATH PATHS "${_vt_cmeel_prefix}")
  set(VT_EIGEN_SOURCE "pip")
endif()
set(VT_EIGEN_DIR "${Eigen3_DIR}")
message(STATUS "vaetransfer: Eigen3 ${Eigen3_VERSION} (${VT_EIGEN_SOURCE}) from ${Eigen3_DIR}")
