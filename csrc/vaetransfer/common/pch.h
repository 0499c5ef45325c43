// Precompiled header of the C++ library: the heavy, stable includes every TU needs.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <Eigen/Core>
#include <Eigen/Geometry>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
