// "min" = min(CKA, Procrustes ν): the reading rule of "How good are variational autoencoders at
// transfer learning?" (§2.3) when the two measures disagree.
#include "vaetransfer/similarity/cka.h"
#include "vaetransfer/similarity/procrustes.h"

namespace vaetransfer::similarity {
namespace {

class MinOfCKAAndProcrustes : public Measure {
 public:
  explicit MinOfCKAAndProcrustes(const Params& p) : Measure(p), fits_(p) {}
  bool needs_gram() const override { return true; }
  bool fit(const LayerFit& layer) const override {
    fits_.fit(layer);
    return true;
  }
  Score score(const PairData& pair) const override {
    const Score nu = fits_.score(pair.x, pair.y);
    return {std::min(linear_cka(pair), nu.value), nu.bound};  // min(c, ·) is 1-Lipschitz: ν's bound holds
  }
  bool fit_all(const std::vector<const LayerFit*>& layers, const BatchContext& context) const override {
    fits_.fit_all(layers, context);
    return true;
  }
  std::vector<Score> score_all(const std::vector<PairData>& pairs, const BatchContext& context) const override {
    std::vector<Score> out = fits_.score_all(pairs, context);
    for (size_t i = 0; i < pairs.size(); ++i) out[i].value = std::min(linear_cka(pairs[i]), out[i].value);
    return out;
  }

 private:
  ProcrustesFit fits_;
};

}  // namespace

VT_REGISTER(MeasureRegistry, {"min", "factor", "min(linear CKA, Procrustes ν), the paper's reading rule (§2.3)",
                              procrustes_fit_specs(), [](const Params& p) -> std::unique_ptr<Measure> {
                                return std::make_unique<MinOfCKAAndProcrustes>(p);
                              }});

}  // namespace vaetransfer::similarity
