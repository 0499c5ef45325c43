#include "vaetransfer/train/trainer.h"

#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "vaetransfer/common/check.h"

namespace vaetransfer::train {

namespace fs = std::filesystem;

namespace {

// splitmix64: independent streams for the noise and the data order from one seed.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

Trainer::Trainer(std::shared_ptr<nn::VAE> model, std::shared_ptr<objectives::Objective> objective,
                 OptimizerSpec optimizer, at::Tensor data, TrainSpec spec)
    : model_(std::move(model)),
      objective_(std::move(objective)),
      optimizer_(std::move(optimizer), model_->named_parameters()),
      data_(std::move(data)),
      spec_(std::move(spec)) {
  const auto& shape = model_->spec().input_shape;
  check_defined(data_, "data");
  VT_CHECK_TYPE(data_.scalar_type() == at::kByte || at::isFloatingType(data_.scalar_type()), "data",
                "expected uint8 or floating-point images, got dtype ", data_.scalar_type());
  VT_CHECK_ARG(data_.dim() == static_cast<int64_t>(shape.size()) + 1 &&
                   std::equal(shape.begin(), shape.end(), data_.sizes().begin() + 1),
               "data", "expected examples of shape ", c10::IntArrayRef(shape), " for this architecture, got data of shape ",
               data_.sizes());
  VT_CHECK_ARG(data_.size(0) > 0, "data", "expected a non-empty data set");
  VT_CHECK_ARG(data_.device().is_cpu(), "data", "expected the data set in CPU memory, got ", data_.device());
  VT_CHECK_ARG(spec_.steps >= 1, "steps", "expected >= 1, got ", spec_.steps);
  VT_CHECK_ARG(spec_.batch_size >= 1, "batch_size", "expected >= 1, got ", spec_.batch_size);
  VT_CHECK_ARG(spec_.snapshot_every >= 0, "snapshot_every", "expected >= 0, got ", spec_.snapshot_every);
  VT_CHECK_ARG(spec_.keep_snapshots >= 0, "keep_snapshots", "expected >= 0, got ", spec_.keep_snapshots);
  VT_CHECK_ARG(spec_.progress_every >= 1, "progress_every", "expected >= 1, got ", spec_.progress_every);
  VT_CHECK_ARG(spec_.metrics_every >= 0, "metrics_every", "expected >= 0, got ", spec_.metrics_every);
  VT_CHECK_ARG(std::isfinite(spec_.data_scale) && spec_.data_scale > 0, "data_scale", "expected > 0, got ",
               spec_.data_scale);
  data_ = data_.contiguous();
  noise_gen_ = nn::make_generator(model_->device(), mix(spec_.seed ^ 0x6e6f697365ull));
  shuffle_gen_ = nn::make_generator(at::kCPU, mix(spec_.seed ^ 0x73687566ull));
  permutation_ = at::randperm(data_.size(0), shuffle_gen_, at::kLong);
}

std::string Trainer::snapshot_dir() const { return (fs::path(spec_.out_dir) / "snapshots").string(); }

at::Tensor Trainer::next_indices() {
  const int64_t n = data_.size(0), b = spec_.batch_size;
  std::vector<at::Tensor> parts;
  int64_t need = b;
  while (need > 0) {
    if (position_ == n) {
      permutation_ = at::randperm(n, shuffle_gen_, at::kLong);
      position_ = 0;
      ++epoch_;
    }
    const int64_t take = std::min(need, n - position_);
    parts.push_back(permutation_.slice(0, position_, position_ + take));
    position_ += take;
    need -= take;
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts);
}

StepReport Trainer::train_step() {
  auto x = data_.index_select(0, next_indices()).to(model_->device()).to(at::kFloat);
  if (spec_.data_scale != 1.0) x.mul_(spec_.data_scale);
  auto f = model_->forward(x, noise_gen_);
  objectives::Batch batch{x, f.logits, f.mean, f.logvar, f.z, step_};
  auto t = (*objective_)(batch);

  // One device→host copy for the whole report.
  auto nan = at::full({}, NAN, t.loss.options());
  auto packed = at::cat({at::stack({t.loss, t.reconstruction, t.kl, t.regularizer,
                                    t.tc.defined() ? t.tc : nan, t.capacity.defined() ? t.capacity : nan})
                             .detach(),
                         t.kl_per_dim.detach()})
                    .to(at::kCPU, at::kDouble);
  const double* v = packed.data_ptr<double>();
  StepReport r;
  r.step = step_ + 1;
  r.loss = v[0];
  r.reconstruction = v[1];
  r.kl = v[2];
  r.regularizer = v[3];
  r.tc = v[4];
  r.capacity = v[5];
  r.kl_per_dim.assign(v + 6, v + packed.numel());
  if (!std::isfinite(r.loss)) {
    std::ostringstream msg;
    msg << "the loss became " << fmt(r.loss) << " at step " << r.step << " (reconstruction " << fmt(r.reconstruction)
        << ", KL " << fmt(r.kl) << ", regulariser " << fmt(r.regularizer) << "); training stopped. ";
    if (last_snapshot_.empty())
      msg << "No snapshot was written before it.";
    else
      msg << "The last good snapshot is " << last_snapshot_ << ".";
    msg << " Try a smaller learning rate.";
    throw TrainingDivergedError(r.step, msg.str());
  }
  optimizer_.zero_grad();
  t.loss.backward();
  optimizer_.step();
  ++step_;
  return r;
}

void Trainer::run(const Callback& progress, const Callback& metrics, int64_t until) {
  const int64_t end = until > 0 ? std::min(until, spec_.steps) : spec_.steps;
  while (step_ < end) {
    reports_.push_back(train_step());
    const auto& r = reports_.back();
    if (!spec_.out_dir.empty() &&
        ((spec_.snapshot_every > 0 && step_ % spec_.snapshot_every == 0) || step_ == spec_.steps))
      save_snapshot();
    if (progress && (step_ % spec_.progress_every == 0 || step_ == end)) progress(r);
    if (metrics && spec_.metrics_every > 0 && step_ % spec_.metrics_every == 0) metrics(r);
  }
}

void Trainer::flush_history() {
  if (spec_.out_dir.empty()) return;
  const auto path = fs::path(spec_.out_dir) / "history.csv";
  const bool fresh = !fs::exists(path);
  std::ofstream out(path, std::ios::app);
  VT_CHECK_ARG(out.good(), "out_dir", "cannot write ", path.string());
  if (fresh) {
    out << "step,loss,reconstruction,kl,regularizer,tc,capacity";
    for (int64_t d = 0; d < model_->spec().latent_dim; ++d) out << ",kl_" << d;
    out << "\n";
  }
  for (; history_flushed_ < reports_.size(); ++history_flushed_) {
    const auto& r = reports_[history_flushed_];
    out << r.step << "," << fmt(r.loss) << "," << fmt(r.reconstruction) << "," << fmt(r.kl) << ","
        << fmt(r.regularizer) << "," << fmt(r.tc) << "," << fmt(r.capacity);
    for (double k : r.kl_per_dim) out << "," << fmt(k);
    out << "\n";
  }
  out.flush();
}

std::string Trainer::save_snapshot() {
  VT_CHECK_ARG(!spec_.out_dir.empty(), "out_dir", "snapshots need an output directory");
  fs::create_directories(snapshot_dir());
  // History first: rows past the snapshot are dropped again on resume.
  flush_history();
  Snapshot s;
  s.step = step_;
  for (auto& [n, t] : model_->state_dict()) s.model.emplace_back(n, t.cpu());
  for (auto& [n, t] : optimizer_.state()) s.optimizer.emplace_back(n, t.detach().cpu().clone());
  s.optimizer_name = optimizer_.spec().name;
  s.objective_name = objective_->name();
  for (auto& [k, v] : objective_->hyperparameters()) s.objective.emplace_back(k, v);
  s.permutation = permutation_;
  s.position = position_;
  s.epoch = epoch_;
  s.noise_rng = noise_gen_.get_state();
  s.shuffle_rng = shuffle_gen_.get_state();
  s.frozen = model_->frozen_parameters();
  char name[64];
  std::snprintf(name, sizeof name, "step_%08lld.pt", static_cast<long long>(step_));
  const auto path = (fs::path(snapshot_dir()) / name).string();
  write_snapshot(s, path);
  last_snapshot_ = path;
  if (spec_.keep_snapshots > 0) {
    auto all = list_snapshots(spec_.out_dir);
    for (size_t i = 0; i + spec_.keep_snapshots < all.size(); ++i) fs::remove(all[i].second);
  }
  return path;
}

int64_t Trainer::resume() {
  if (spec_.out_dir.empty()) return step_;
  auto all = list_snapshots(spec_.out_dir);
  if (all.empty()) {
    // A run that never reached a snapshot starts afresh: drop its partial history.
    fs::remove(fs::path(spec_.out_dir) / "history.csv");
    return step_;
  }
  const auto& [step, path] = all.back();
  auto s = read_snapshot(path);
  VT_CHECK_ARG(s.optimizer_name == optimizer_.spec().name, "optimizer", "the snapshot ", path, " was made with '",
               s.optimizer_name, "', not '", optimizer_.spec().name, "'");
  VT_CHECK_ARG(s.objective_name == objective_->name(), "objective", "the snapshot ", path, " was made with '",
               s.objective_name, "', not '", objective_->name(), "'");
  VT_CHECK_ARG(s.permutation.numel() == data_.size(0), "data", "the snapshot ", path, " was made with ",
               s.permutation.numel(), " examples, got ", data_.size(0));
  model_->load_state_dict(s.model);
  model_->set_trainable({"all"}, true);
  if (!s.frozen.empty()) model_->set_trainable(s.frozen, false);
  optimizer_.load_state(s.optimizer);
  permutation_ = s.permutation;
  position_ = s.position;
  epoch_ = s.epoch;
  noise_gen_.set_state(s.noise_rng);
  shuffle_gen_.set_state(s.shuffle_rng);
  step_ = s.step;
  last_snapshot_ = path;
  // Keep history rows up to the snapshot only.
  const auto hist = fs::path(spec_.out_dir) / "history.csv";
  if (fs::exists(hist)) {
    std::ifstream in(hist);
    std::string line, kept;
    bool header = true;
    while (std::getline(in, line)) {
      if (header || std::stoll(line.substr(0, line.find(','))) <= step_) kept += line + "\n";
      header = false;
    }
    in.close();
    const auto tmp = hist.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << kept;
    }
    fs::rename(tmp, hist);
  }
  return step_;
}

}  // namespace vaetransfer::train
