#include "vaetransfer/common/params.h"

#include <cmath>
#include <set>
#include <sstream>

#include "vaetransfer/common/check.h"

namespace vaetransfer {

std::string to_string(ParamType type) {
  switch (type) {
    case ParamType::Bool: return "bool";
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::String: return "str";
    case ParamType::Ints: return "list[int]";
    case ParamType::Floats: return "list[float]";
    case ParamType::Strings: return "list[str]";
  }
  return "?";
}

namespace {

template <typename V>
std::string join(const std::vector<V>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

const char* kind_of(const ParamValue& v) {
  static const char* names[] = {"bool", "int", "float", "str", "list[int]", "list[float]", "list[str]"};
  return names[v.index()];
}

// The given value converted to `type`, or an ArgumentTypeError naming the key.
ParamValue coerce(const ParamValue& v, ParamType type, const std::string& key) {
  auto fail = [&]() {
    VT_CHECK_TYPE(false, key, "expected ", to_string(type), ", got ", kind_of(v), " ", to_string(v));
  };
  switch (type) {
    case ParamType::Bool:
      if (std::holds_alternative<bool>(v)) return v;
      break;
    case ParamType::Int:
      if (std::holds_alternative<int64_t>(v)) return v;
      break;
    case ParamType::Float:
      if (std::holds_alternative<double>(v)) return v;
      if (std::holds_alternative<int64_t>(v)) return static_cast<double>(std::get<int64_t>(v));
      break;
    case ParamType::String:
      if (std::holds_alternative<std::string>(v)) return v;
      break;
    case ParamType::Ints:
      if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
      // An empty list arrives as whichever list type was tried first.
      if (std::holds_alternative<std::vector<double>>(v) && std::get<std::vector<double>>(v).empty())
        return std::vector<int64_t>{};
      if (std::holds_alternative<std::vector<std::string>>(v) && std::get<std::vector<std::string>>(v).empty())
        return std::vector<int64_t>{};
      break;
    case ParamType::Floats:
      if (std::holds_alternative<std::vector<double>>(v)) return v;
      if (std::holds_alternative<std::vector<int64_t>>(v)) {
        const auto& i = std::get<std::vector<int64_t>>(v);
        return std::vector<double>(i.begin(), i.end());
      }
      if (std::holds_alternative<std::vector<std::string>>(v) && std::get<std::vector<std::string>>(v).empty())
        return std::vector<double>{};
      break;
    case ParamType::Strings:
      if (std::holds_alternative<std::vector<std::string>>(v)) return v;
      if (std::holds_alternative<std::string>(v)) return std::vector<std::string>{std::get<std::string>(v)};
      if (std::holds_alternative<std::vector<int64_t>>(v) && std::get<std::vector<int64_t>>(v).empty())
        return std::vector<std::string>{};
      if (std::holds_alternative<std::vector<double>>(v) && std::get<std::vector<double>>(v).empty())
        return std::vector<std::string>{};
      break;
  }
  fail();
  return v;
}

}  // namespace

std::string to_string(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        std::ostringstream out;
        if constexpr (std::is_same_v<V, bool>) {
          out << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<V, std::string>) {
          out << "'" << v << "'";
        } else if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, double>) {
          out << v;
        } else {
          out << join(v);
        }
        return out.str();
      },
      value);
}

Params::Params(const std::vector<ParamSpec>& specs, const std::map<std::string, ParamValue>& given,
               const std::string& owner)
    : owner_(owner) {
  std::set<std::string> known;
  for (const auto& s : specs) known.insert(s.name);
  for (const auto& [k, v] : given) {
    if (known.count(k)) continue;
    std::vector<std::string> names(known.begin(), known.end());
    VT_CHECK_ARG(false, k, "'", owner, "' has no parameter '", k, "'; its parameters are ",
                 names.empty() ? std::string("(none)") : join(names));
  }
  for (const auto& s : specs) {
    auto it = given.find(s.name);
    ParamValue v = it == given.end() ? s.default_value : coerce(it->second, s.type, s.name);
    if (std::holds_alternative<double>(v)) {
      const double d = std::get<double>(v);
      VT_CHECK_ARG(!std::isnan(d) || it == given.end(), s.name, "expected a number, got nan");
    }
    if (it != given.end()) given_[s.name] = v;
    values_.emplace_back(s.name, std::move(v));
  }
}

const ParamValue& Params::at(const std::string& name) const {
  for (const auto& [k, v] : values_)
    if (k == name) return v;
  throw std::logic_error("vaetransfer: '" + owner_ + "' reads an undeclared parameter '" + name + "'");
}

bool Params::flag(const std::string& name) const { return std::get<bool>(at(name)); }
int64_t Params::integer(const std::string& name) const { return std::get<int64_t>(at(name)); }
double Params::number(const std::string& name) const { return std::get<double>(at(name)); }
const std::string& Params::str(const std::string& name) const { return std::get<std::string>(at(name)); }
const std::vector<int64_t>& Params::ints(const std::string& name) const {
  return std::get<std::vector<int64_t>>(at(name));
}
const std::vector<double>& Params::numbers(const std::string& name) const {
  return std::get<std::vector<double>>(at(name));
}
const std::vector<std::string>& Params::strings(const std::string& name) const {
  return std::get<std::vector<std::string>>(at(name));
}

void throw_unknown_name(const std::string& name, const char* arg, const std::vector<std::string>& known) {
  VT_CHECK_ARG(false, arg, "unknown ", arg, " '", name, "'; expected one of ", join(known));
  throw std::logic_error("unreachable");
}

}  // namespace vaetransfer
