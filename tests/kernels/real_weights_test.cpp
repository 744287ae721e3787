// matmul on the real test models' 2-D weights (../shared/models): every
// tensor of every supported type, every ISA path, against matmul_reference
// fed the same int8-rounded activations (float weights: the exact ones).
// Same tolerance as matmul_test: |y - ref| <= 2e-5 sum |w x|.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/file.h"
#include "gguf/quant.h"
#include "kernel_test_util.h"
#include "kernels/isa_kernels.h"
#include "kernels/matmul.h"
#include "kernels/panel.h"
#include "test_models.h"

namespace llmserve::kernels {
namespace {

void check_model(const std::string& path) {
  const gguf::File file = gguf::File::open(path);
  ThreadPool pool(2);
  std::mt19937 rng(5);
  int checked = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.dims.size() != 2) continue;
    Matrix w{t.type, t.data, static_cast<int64_t>(t.rows()), static_cast<int64_t>(t.cols()),
             gguf::row_bytes(t.type, t.cols())};
    SCOPED_TRACE(t.name);
    const int64_t n_tokens = 3;
    auto x = llmserve::testing::random_floats(rng, static_cast<size_t>(n_tokens * w.cols));
    // The reference gets what the kernels multiply: the activations rounded
    // to int8 per 32-block for quantized weights.
    if (is_quantized(panel_format(t.type))) {
      std::vector<Q8Act> q(static_cast<size_t>(w.cols / kQBlock));
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        float* row = x.data() + tok * w.cols;
        isa_kernels(Isa::scalar).matmul->quantize(row, w.cols, q.data(), 1);
        for (int64_t c = 0; c < w.cols; ++c) row[c] = q[c / kQBlock].d * q[c / kQBlock].qs[c % kQBlock];
      }
    }
    std::vector<float> ref(static_cast<size_t>(n_tokens * w.rows)), abs_ref(ref.size());
    matmul_reference(w, x.data(), n_tokens, ref.data());
    // sum |w x| from the reference on |w| and |x|.
    std::vector<float> wf(static_cast<size_t>(w.rows * w.cols)), ax(x.size());
    for (int64_t r = 0; r < w.rows; ++r) gguf::dequantize_row(t.type, t.data + r * w.row_bytes, wf.data() + r * w.cols, w.cols);
    for (size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
    for (int64_t tok = 0; tok < n_tokens; ++tok)
      for (int64_t r = 0; r < w.rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(wf[r * w.cols + c]) * ax[tok * w.cols + c];
        abs_ref[tok * w.rows + r] = static_cast<float>(s);
      }
    Matrix prepared = w;
    const PackedWeights storage = prepare(prepared, &pool);
    for (Isa isa : llmserve::testing::runnable_isas()) {
      llmserve::testing::IsaGuard guard(isa);
      std::vector<float> y(ref.size());
      matmul(prepared, x.data(), n_tokens, y.data(), pool);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_LE(std::fabs(y[i] - ref[i]), 2e-5 * abs_ref[i] + 1e-30) << isa_name(isa) << " output " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(RealWeights, TinyStoriesQ8_0) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  check_model(path);
}

TEST(RealWeights, TinyStoriesF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  check_model(path);
}

TEST(RealWeights, Stories260KF32) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  check_model(path);
}

}  // namespace
}  // namespace llmserve::kernels
