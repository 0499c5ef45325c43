// Precompiled header of the binding TUs: Torch's Python bridge and pybind11.
#pragma once
#include <torch/python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
