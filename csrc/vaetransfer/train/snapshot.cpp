// Snapshot files: torch's pickle format (torch::pickle_save), readable by torch.load in Python.
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "vaetransfer/common/check.h"
#include "vaetransfer/train/trainer.h"

namespace vaetransfer::train {

namespace fs = std::filesystem;
using c10::IValue;

// A damaged file (what resume may set aside), unlike an unreadable one or one of an old format.
#define VT_CHECK_CORRUPT(cond, arg, ...)                                                         \
  do {                                                                                          \
    if (!(cond)) throw CorruptSnapshotError((arg), ::vaetransfer::detail::concat(__VA_ARGS__)); \
  } while (0)

namespace {

// Version 2 adds buffers to "model", the task, schedules and history columns; version 3 the
// run's config hash and a checksum of the contents. Version 2 snapshots still resume (unchecked);
// version 1 snapshots (VAE runs of earlier releases) still load their model.
constexpr const char* kFormat = "vaetransfer-snapshot-3";
constexpr const char* kFormatV2 = "vaetransfer-snapshot-2";
constexpr const char* kFormatV1 = "vaetransfer-snapshot-1";

// An error message quoting a parser's text: bytes of a corrupt file are not valid UTF-8 (Python
// would fail decoding the message itself).
std::string printable(const std::string& text, size_t limit = 200) {
  std::string out;
  for (char c : text.substr(0, limit)) out += (c >= 32 && c < 127) ? c : '?';
  return out;
}

// h = (h ^ word) * odd prime, word by word: each step is a bijection of h, so changing any one
// word always changes the result (a flipped bit anywhere is detected, not just probably).
struct Checksum {
  uint64_t h = 0xcbf29ce484222325ull;
  void words(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, bytes - i);
    mix(tail ^ (static_cast<uint64_t>(bytes) << 56));
  }
  void mix(uint64_t w) { h = (h ^ w) * 0x100000001b3ull; }
  void text(const std::string& s) { words(s.data(), s.size()); }
  void number(int64_t v) { mix(static_cast<uint64_t>(v)); }
  void tensor(const at::Tensor& t) {
    if (!t.defined()) return mix(0);
    const auto c = t.detach().cpu().contiguous();
    text(c10::toString(c.scalar_type()));
    for (auto d : c.sizes()) number(d);
    words(c.data_ptr(), c.nbytes());
  }
  void named(const std::vector<std::pair<std::string, at::Tensor>>& items) {
    number(static_cast<int64_t>(items.size()));
    for (const auto& [k, t] : items) {
      text(k);
      tensor(t);
    }
  }
  void strings(const std::vector<std::pair<std::string, std::string>>& items) {
    number(static_cast<int64_t>(items.size()));
    for (const auto& [k, v] : items) {
      text(k);
      text(v);
    }
  }
  void list(const std::vector<std::string>& items) {
    number(static_cast<int64_t>(items.size()));
    for (const auto& v : items) text(v);
  }
};

c10::impl::GenericDict string_dict(const std::vector<std::pair<std::string, std::string>>& items) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::StringType::get());
  for (const auto& [k, v] : items) d.insert(k, v);
  return d;
}

std::vector<std::pair<std::string, std::string>> strings_of(const IValue& v) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : v.toGenericDict()) out.emplace_back(kv.key().toStringRef(), kv.value().toStringRef());
  return out;
}

c10::List<std::string> string_list(const std::vector<std::string>& items) {
  c10::List<std::string> out;
  for (const auto& f : items) out.push_back(f);
  return out;
}

c10::impl::GenericDict tensor_dict(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, t] : items) d.insert(k, t);
  return d;
}

std::vector<std::pair<std::string, at::Tensor>> tensors_of(const IValue& v, const std::string& path, const char* key) {
  VT_CHECK_CORRUPT(v.isGenericDict(), "path", path, ": entry '", key, "' is not a dict");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& kv : v.toGenericDict()) out.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
  return out;
}

c10::impl::GenericDict load_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VT_CHECK_ARG(fs::is_regular_file(path) && in.good(), "path", "cannot read snapshot ", path,
               " (not a readable file)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  IValue v;
  try {
    v = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    VT_CHECK_CORRUPT(false, "path", path, " is not a readable snapshot (corrupt or truncated: ", printable(e.what()), ")");
  }
  VT_CHECK_CORRUPT(v.isGenericDict(), "path", path, " is not a vaetransfer snapshot");
  auto d = v.toGenericDict();
  const bool known = d.contains("format") && d.at("format").isString() &&
                     (d.at("format").toStringRef() == kFormat || d.at("format").toStringRef() == kFormatV2 ||
                      d.at("format").toStringRef() == kFormatV1);
  VT_CHECK_CORRUPT(known, "path", path, " is not a vaetransfer snapshot (format ", kFormat, ")");
  return d;
}

Snapshot parse_snapshot(const c10::impl::GenericDict& d, const std::string& path);
Snapshot verified(const c10::impl::GenericDict& d, const std::string& path);

}  // namespace

void write_snapshot(const Snapshot& s, const std::string& path) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("format", std::string(kFormat));
  d.insert("step", s.step);
  d.insert("model", tensor_dict(s.model));
  d.insert("optimizer", tensor_dict(s.optimizer));
  d.insert("optimizer_name", s.optimizer_name);
  d.insert("task_name", s.task_name);
  d.insert("task", string_dict(s.task));
  d.insert("schedules", string_dict(s.schedules));
  d.insert("columns", string_list(s.columns));
  c10::impl::GenericDict data(c10::StringType::get(), c10::AnyType::get());
  data.insert("permutation", s.permutation);
  data.insert("position", s.position);
  data.insert("epoch", s.epoch);
  d.insert("data", data);
  c10::impl::GenericDict rng(c10::StringType::get(), c10::TensorType::get());
  rng.insert("noise", s.noise_rng);
  rng.insert("shuffle", s.shuffle_rng);
  d.insert("rng", rng);
  d.insert("frozen", string_list(s.frozen));
  d.insert("regularizers", tensor_dict(s.regularizers));
  d.insert("config_hash", s.config_hash);
  d.insert("checksum", snapshot_checksum(s));

  const auto bytes = torch::jit::pickle_save(IValue(d));
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  VT_CHECK_ARG(f != nullptr, "out_dir", "cannot write ", tmp);
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0 &&
                  ::fsync(fileno(f)) == 0;
  std::fclose(f);
  VT_CHECK_ARG(ok, "out_dir", "failed writing ", tmp);
  fs::rename(tmp, path);  // atomic on POSIX: readers see the old file or the complete new one
}

std::string snapshot_checksum(const Snapshot& s) {
  Checksum c;
  c.number(s.step);
  c.named(s.model);
  c.named(s.optimizer);
  c.text(s.optimizer_name);
  c.text(s.task_name);
  c.strings(s.task);
  c.strings(s.schedules);
  c.list(s.columns);
  c.list(s.frozen);
  c.named(s.regularizers);
  c.tensor(s.permutation);
  c.tensor(s.noise_rng);
  c.tensor(s.shuffle_rng);
  c.number(s.position);
  c.number(s.epoch);
  c.text(s.config_hash);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(c.h));
  return hex;
}

Snapshot read_snapshot(const std::string& path) { return verified(load_dict(path), path); }

namespace {

Snapshot verified(const c10::impl::GenericDict& d, const std::string& path) {
  const auto format = d.at("format").toStringRef();
  VT_CHECK_ARG(format != kFormatV1, "path", path,
               " was written by an earlier vaetransfer: its model loads, but the run cannot resume");
  Snapshot s;
  try {
    s = parse_snapshot(d, path);
  } catch (const c10::Error& e) {  // an entry of the wrong kind: the file is damaged
    VT_CHECK_CORRUPT(false, "path", path, " is corrupt (", printable(e.what_without_backtrace()), ")");
  }
  if (format == kFormat) {
    const auto saved = d.contains("checksum") && d.at("checksum").isString() ? d.at("checksum").toStringRef() : "";
    VT_CHECK_CORRUPT(saved == snapshot_checksum(s), "path", path,
                 " is corrupt: its contents do not match their checksum (a changed byte, e.g. a disk or copy error)");
  }
  return s;
}

Snapshot parse_snapshot(const c10::impl::GenericDict& d, const std::string& path) {
  Snapshot s;
  s.step = d.at("step").toInt();
  s.model = tensors_of(d.at("model"), path, "model");
  s.optimizer = tensors_of(d.at("optimizer"), path, "optimizer");
  s.optimizer_name = d.at("optimizer_name").toStringRef();
  s.task_name = d.at("task_name").toStringRef();
  s.task = strings_of(d.at("task"));
  s.schedules = strings_of(d.at("schedules"));
  for (const auto& c : d.at("columns").toListRef()) s.columns.push_back(c.toStringRef());
  auto data = d.at("data").toGenericDict();
  s.permutation = data.at("permutation").toTensor();
  s.position = data.at("position").toInt();
  s.epoch = data.at("epoch").toInt();
  auto rng = d.at("rng").toGenericDict();
  s.noise_rng = rng.at("noise").toTensor();
  s.shuffle_rng = rng.at("shuffle").toTensor();
  for (const auto& f : d.at("frozen").toListRef()) s.frozen.push_back(f.toStringRef());
  if (d.contains("regularizers")) s.regularizers = tensors_of(d.at("regularizers"), path, "regularizers");
  if (d.contains("config_hash")) s.config_hash = d.at("config_hash").toStringRef();
  return s;
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> read_snapshot_model(const std::string& path) {
  auto d = load_dict(path);
  if (d.at("format").toStringRef() == kFormat) return verified(d, path).model;
  try {
    return tensors_of(d.at("model"), path, "model");
  } catch (const c10::Error& e) {
    VT_CHECK_CORRUPT(false, "path", path, " is corrupt (", printable(e.what_without_backtrace()), ")");
  }
  return {};
}

std::vector<std::pair<int64_t, std::string>> list_snapshots(const std::string& out_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  const auto dir = fs::path(out_dir) / "snapshots";
  if (!fs::is_directory(dir)) return out;
  static const std::regex name(R"(step_(\d+)\.pt)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const auto file = e.path().filename().string();
    if (std::regex_match(file, m, name)) out.emplace_back(std::stoll(m[1].str()), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace vaetransfer::train
