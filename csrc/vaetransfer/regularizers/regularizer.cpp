#include "vaetransfer/regularizers/regularizer.h"

namespace vaetransfer::regularizers {

RegularizerPtr make_regularizer(const std::string& name, const std::map<std::string, ParamValue>& params) {
  return RegularizerPtr(RegularizerRegistry::get().make(name, params, "regularizer"));
}

}  // namespace vaetransfer::regularizers
