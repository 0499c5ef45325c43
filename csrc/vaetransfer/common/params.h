// Named, typed parameters of anything built by name (models, tasks, regularisers, schedules),
// and the registries that build them. A registered factory declares its parameters once
// (name, type, default, doc); Python reads that list from the core, so a new objective,
// model family or regulariser is one C++ file with one registration and no Python change.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

namespace vaetransfer {

using ParamValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>, std::vector<std::string>>;
enum class ParamType { Bool, Int, Float, String, Ints, Floats, Strings };

std::string to_string(ParamType type);
std::string to_string(const ParamValue& value);

struct ParamSpec {
  std::string name;
  ParamType type;
  ParamValue default_value;
  std::string doc;
};

// Values checked against specs: unknown names, wrong types (an int where a float is expected
// is accepted; a float or a bool where an int is expected is not) and missing values are
// argument errors naming the key. Getters return the given value or the default.
class Params {
 public:
  Params() = default;
  Params(const std::vector<ParamSpec>& specs, const std::map<std::string, ParamValue>& given, const std::string& owner);

  bool given(const std::string& name) const { return given_.count(name) > 0; }
  bool flag(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  const std::string& str(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  const std::vector<double>& numbers(const std::string& name) const;
  const std::vector<std::string>& strings(const std::string& name) const;
  // Every parameter with its resolved value, in declaration order.
  const std::vector<std::pair<std::string, ParamValue>>& values() const { return values_; }
  const std::string& owner() const { return owner_; }

 private:
  const ParamValue& at(const std::string& name) const;
  std::string owner_;
  std::vector<std::pair<std::string, ParamValue>> values_;
  std::map<std::string, ParamValue> given_;
};

// Base of everything a registry builds: its registered name and resolved parameters.
class Registered {
 public:
  virtual ~Registered() = default;
  const std::string& name() const { return params_.owner(); }
  const Params& params() const { return params_; }

 protected:
  explicit Registered(Params params) : params_(std::move(params)) {}

 private:
  Params params_;
};

// Builds `T` by name. Entries register themselves at static-initialisation time
// (VT_REGISTER); the core is linked as object files so no registration is dropped.
template <typename T, typename... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<T>(const Params&, Args...)>;
  struct Entry {
    std::string name;
    std::string family;  // what it applies to (e.g. the model family a task trains)
    std::string doc;
    std::vector<ParamSpec> params;
    Factory make;
    std::vector<std::string> aliases{};  // optional: older names that still resolve
  };

  static Registry& get() {
    static Registry registry;
    return registry;
  }
  bool add(Entry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
    return true;
  }
  // The entry called `name` (or one of its aliases); ArgumentError naming `arg` listing the known names.
  const Entry& find(const std::string& name, const char* arg) const;
  std::unique_ptr<T> make(const std::string& name, const std::map<std::string, ParamValue>& given, const char* arg,
                          Args... args) const {
    const auto& e = find(name, arg);
    return e.make(Params(e.params, given, e.name), std::forward<Args>(args)...);
  }
  std::vector<const Entry*> entries() const {
    std::vector<const Entry*> out;
    for (const auto& e : entries_) out.push_back(&e);
    return out;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }

 private:
  std::vector<Entry> entries_;
  std::mutex mutex_;
};

[[noreturn]] void throw_unknown_name(const std::string& name, const char* arg, const std::vector<std::string>& known);

template <typename T, typename... Args>
const typename Registry<T, Args...>::Entry& Registry<T, Args...>::find(const std::string& name, const char* arg) const {
  for (const auto& e : entries_) {
    if (e.name == name) return e;
    for (const auto& a : e.aliases)
      if (a == name) return e;
  }
  throw_unknown_name(name, arg, names());
}

#define VT_CONCAT_INNER(a, b) a##b
#define VT_CONCAT(a, b) VT_CONCAT_INNER(a, b)
// VT_REGISTER(RegistryType, {entry fields...}) at namespace scope in the entry's own file.
#define VT_REGISTER(REGISTRY, ...) \
  static const bool VT_CONCAT(vt_registered_, __COUNTER__) = REGISTRY::get().add(REGISTRY::Entry __VA_ARGS__)

}  // namespace vaetransfer
