// Precompiled header of the C++ library: the heavy, stable includes every TU needs.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <Eigen/Core>
#include <Eigen/Geometry>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
