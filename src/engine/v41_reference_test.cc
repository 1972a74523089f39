// An independent, naive DeepSeek-V4.1 forward written straight from v4-architecture.md
// sections 3-5 (whole sequence at once, no state, fp64 arithmetic on the dequantized weights)
// against the engine with QAT off, on tiny-v41 with its Engram layer: the sequence is long
// enough that the top-k prunes on both ratios and the candidate blocks prune (40 tokens:
// 40 ratio-1 entries > 4 blocks of 8 > index_topk 16). With a picture's span (the tower's rows
// in place of token embeddings, bias_vl routing, the Engram pad) the logits match it too, and
// its first-token logits are checked in (testdata/) so that neither side drifts; a bidirectional
// span (Vision-Exp's rule) matches the reference given the same rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>

#include "engine/test_image_prompt.h"
#include "engine/test_model.h"
#include "model/checkpoint_specs.h"

namespace flashserve::engine {
namespace {

using Vec = std::vector<double>;
using Rows = std::vector<Vec>;  // one vector per token

struct Reference {
  const Model& model;
  const model::ModelConfig& c = model.config();
  std::vector<int32_t> tokens;
  int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<Rows> entries, keys;                      // per KV-source layer
  std::vector<std::vector<std::vector<int>>> selected;  // per index-source layer, per token
  std::vector<std::vector<std::vector<bool>>> candidates;
  // Pictures: positions whose input is an embedding row instead of a token's (empty: none).
  std::vector<bool> image;
  Rows embedded;
  mutable int vl_routing_changed = 0;  // (image position, layer) pairs where bias_vl chose other experts
  std::vector<TokenRange> spans;      // bidirectional picture spans (absolute positions)

  bool IsImage(int64_t t) const { return !image.empty() && image[static_cast<size_t>(t)]; }
  // The synthetic token map the test models bind (id % 1000), not the model's own lookup.
  static int64_t EngramClass(int64_t token) { return token % 1000; }

  Rows Mul(const model::Matrix& w, const Rows& x) const {
    Rows y(x.size(), Vec(static_cast<size_t>(w.rows)));
    Vec row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t k = 0; k < w.cols; ++k) row[k] = w.At(r, k);
      for (size_t t = 0; t < x.size(); ++t) {
        double acc = 0;
        for (int64_t k = 0; k < w.cols; ++k) acc += row[k] * x[t][k];
        y[t][r] = acc;
      }
    }
    return y;
  }
  static Vec RmsNorm(const Vec& x, const std::vector<float>* w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    Vec out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * (w ? (*w)[i] : 1.0);
    return out;
  }
  void Rope(double* x, int64_t pos, bool compress, bool inverse) const {
    float cos[64], sin[64];
    model.rope(compress ? model::RopeTable::kCompress : model::RopeTable::kMain).Angles(pos, cos, sin);
    for (int i = 0; i < c.rope_head_dim / 2; ++i) {
      const double a = x[2 * i], b = x[2 * i + 1], s = inverse ? -sin[i] : sin[i];
      x[2 * i] = a * cos[i] - b * s;
      x[2 * i + 1] = a * s + b * cos[i];
    }
  }
  static double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

  // pre / post / comb of one site for one token's streams (flattened, stream-major).
  void Mixes(const model::HcWeights& w, const Vec& x, Vec* pre, Vec* post, Vec* comb) const {
    const int hc = c.hc_mult, width = c.hc_dim();
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / width + c.norm_eps);
    Vec m(static_cast<size_t>(c.hc_mix()));
    for (int i = 0; i < c.hc_mix(); ++i) {
      double acc = 0;
      for (int k = 0; k < width; ++k) acc += w.fn[static_cast<size_t>(i) * width + k] * x[k];
      m[i] = acc * inv;
    }
    pre->assign(hc, 0);
    post->assign(hc, 0);
    comb->assign(hc * hc, 0);
    for (int i = 0; i < hc; ++i) {
      (*pre)[i] = Sigmoid(m[i] * w.scale[0] + w.base[i]) + c.hc_eps;
      (*post)[i] = 2 * Sigmoid(m[hc + i] * w.scale[1] + w.base[hc + i]);
    }
    Vec& cm = *comb;
    for (int k = 0; k < hc * hc; ++k) cm[k] = m[2 * hc + k] * w.scale[2] + w.base[2 * hc + k];
    for (int i = 0; i < hc; ++i) {  // row softmax + eps
      double mx = -1e300, s = 0;
      for (int j = 0; j < hc; ++j) mx = std::max(mx, cm[i * hc + j]);
      for (int j = 0; j < hc; ++j) s += cm[i * hc + j] = std::exp(cm[i * hc + j] - mx);
      for (int j = 0; j < hc; ++j) cm[i * hc + j] = cm[i * hc + j] / s + c.hc_eps;
    }
    for (int it = 0; it < c.hc_sinkhorn_iters; ++it) {
      if (it > 0)
        for (int i = 0; i < hc; ++i) {
          double s = 0;
          for (int j = 0; j < hc; ++j) s += cm[i * hc + j];
          for (int j = 0; j < hc; ++j) cm[i * hc + j] /= s + c.hc_eps;
        }
      for (int j = 0; j < hc; ++j) {
        double s = 0;
        for (int i = 0; i < hc; ++i) s += cm[i * hc + j];
        for (int i = 0; i < hc; ++i) cm[i * hc + j] /= s + c.hc_eps;
      }
    }
  }
  Vec Collapse(const Vec& x, const Vec& w) const {
    Vec u(static_cast<size_t>(c.hidden_size), 0);
    for (int i = 0; i < c.hc_mult; ++i)
      for (int64_t k = 0; k < c.hidden_size; ++k) u[k] += w[i] * x[i * c.hidden_size + k];
    return u;
  }
  void Expand(Vec* x, const Vec& y, const Vec& post, const Vec& comb) const {
    const Vec old = *x;
    const int hc = c.hc_mult;
    const int64_t d = c.hidden_size;
    for (int j = 0; j < hc; ++j)
      for (int64_t k = 0; k < d; ++k) {
        double v = post[j] * y[k];
        for (int i = 0; i < hc; ++i) v += comb[i * hc + j] * old[i * d + k];
        (*x)[j * d + k] = v;
      }
  }

  void Engram(int layer, Rows* x) const {
    const model::EngramWeights& w = model.layer(layer).engram;
    const int e = model::EngramIndex(c, layer), hd = c.engram.head_dim, back = c.engram.max_ngram_size - 1;
    const int cols = model.engram_hasher()->num_columns();
    Rows gathered(static_cast<size_t>(T), Vec(static_cast<size_t>(cols) * hd));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> grams;
      for (int k = 0; k <= back; ++k) {  // the pad before the start and across pictures
        grams.push_back(t - k < 0 || IsImage(t - k) ? EngramClass(c.engram.pad_id) : EngramClass(tokens[t - k]));
      }
      std::vector<int64_t> rows(static_cast<size_t>(cols));
      model.engram_hasher()->RowIds(e, grams, rows.data());
      for (int col = 0; col < cols; ++col)
        for (int k = 0; k < hd; ++k) gathered[t][col * hd + k] = w.embed.At(rows[col], k);
    }
    Rows kv = Mul(w.wkv, gathered);
    const int64_t d = c.hidden_size;
    for (int64_t t = 0; t < T; ++t)
      for (int i = 0; i < c.hc_mult; ++i) {
        double sx = 0, sk = 0, dot = 0;
        for (int64_t k = 0; k < d; ++k) {
          const double xv = (*x)[t][i * d + k], kv_ = kv[t][i * d + k];
          sx += xv * xv;
          sk += kv_ * kv_;
          dot += xv * w.q_weight[i * d + k] * w.k_weight[i * d + k] * kv_;
        }
        const double s = dot / std::sqrt(sx / d + c.norm_eps) / std::sqrt(sk / d + c.norm_eps) / std::sqrt(double(d));
        const double gate = Sigmoid(std::copysign(std::sqrt(std::max(std::fabs(s), 1e-6)), s));
        for (int64_t k = 0; k < d; ++k) (*x)[t][i * d + k] += gate * kv[t][c.hc_mult * d + k];
      }
  }

  // Entries of the KV source `layer` from its input h: pooled, normed latent -> key / entry.
  void Compress(int layer, const Rows& h) {
    const model::AttentionWeights& w = model.layer(layer).attn;
    const int ratio = c.compress_ratios[layer];
    Rows a = Mul(w.compressor.wkv, h), z = ratio > 1 ? Mul(w.compressor.wgate, h) : Rows();
    Rows latents;
    for (int64_t g = 0; (g + 1) * ratio <= T; ++g) {
      Vec pooled(static_cast<size_t>(c.head_dim));
      for (int k = 0; k < c.head_dim; ++k) {
        if (ratio == 1) {
          pooled[k] = a[g][k];
          continue;
        }
        double mx = -1e300, s = 0, acc = 0;
        for (int j = 0; j < ratio; ++j) mx = std::max(mx, z[g * ratio + j][k]);
        for (int j = 0; j < ratio; ++j) {
          const double e = std::exp(z[g * ratio + j][k] - mx);
          s += e;
          acc += e * a[g * ratio + j][k];
        }
        pooled[k] = acc / s;
      }
      latents.push_back(RmsNorm(pooled, &w.compressor.norm, c.norm_eps));
    }
    Rows k = Mul(w.indexer.wk, latents);
    for (size_t g = 0; g < latents.size(); ++g) {
      k[g] = RmsNorm(k[g], &w.indexer.k_norm, c.norm_eps);
      Rope(k[g].data() + c.index_head_dim - c.rope_head_dim, static_cast<int64_t>(g) * ratio, true, false);
      Rope(latents[g].data() + c.head_dim - c.rope_head_dim, static_cast<int64_t>(g) * ratio, true, false);
    }
    entries[layer] = latents;
    keys[layer] = k;
  }

  void Index(int layer, int source, const Rows& h, const Rows& q_lat) {
    const model::IndexerWeights& w = model.layer(layer).attn.indexer;
    const int ratio = c.compress_ratios[layer], heads = c.index_n_heads, dim = c.index_head_dim;
    const int block = c.candidate_block_size;
    Rows q = Mul(w.wq_b, q_lat), wts = Mul(w.weights_proj, h);
    const bool is_candidate = layer == c.candidate_source_layer;
    const bool use_candidates = c.candidate_source_layer >= 0 && c.candidate_source_layer < layer;
    selected[layer].assign(static_cast<size_t>(T), {});
    if (is_candidate) candidates[layer].assign(static_cast<size_t>(T), {});
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = (t + 1) / ratio;
      Vec scores(static_cast<size_t>(n), 0);
      for (int hd = 0; hd < heads; ++hd) {
        double* qh = q[t].data() + hd * dim;
        Rope(qh + dim - c.rope_head_dim, t, true, false);
        for (int64_t e = 0; e < n; ++e) {
          double dot = 0;
          for (int k = 0; k < dim; ++k) dot += qh[k] * keys[source][e][k];
          scores[e] += wts[t][hd] / std::sqrt(double(dim)) / std::sqrt(double(heads)) * std::max(0.0, dot);
        }
      }
      const int64_t blocks = (n + block - 1) / block;
      if (is_candidate) {
        std::vector<double> bs(static_cast<size_t>(blocks), -1e300);
        for (int64_t e = 0; e < n; ++e) bs[e / block] = std::max(bs[e / block], scores[e]);
        if (blocks > 0) bs[blocks - 1] = 1e300;
        std::vector<int> order(static_cast<size_t>(blocks));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return bs[x] > bs[y]; });
        std::vector<bool> keep(static_cast<size_t>(blocks), false);
        for (int i = 0; i < std::min<int64_t>(blocks, c.candidate_topk_blocks); ++i) keep[order[i]] = true;
        candidates[layer][t] = keep;
      }
      std::vector<int> order;
      for (int64_t e = 0; e < n; ++e)
        if (!use_candidates || candidates[c.candidate_source_layer][t][e / block]) order.push_back(static_cast<int>(e));
      std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return scores[x] > scores[y]; });
      order.resize(std::min<size_t>(order.size(), static_cast<size_t>(c.index_topk)));
      std::sort(order.begin(), order.end());
      selected[layer][t] = order;
    }
  }

  Rows Attention(int layer, const Rows& h) {
    const model::LayerSpec& spec = model.plan()[layer];
    const model::AttentionWeights& w = model.layer(layer).attn;
    const bool compress = spec.compress_ratio > 0;
    const int H = c.num_heads, D = c.head_dim, nope = c.nope_dim();
    Rows q_lat = Mul(w.wq_a, h);
    for (auto& v : q_lat) v = RmsNorm(v, &w.q_norm, c.norm_eps);
    Rows q = Mul(w.wq_b, q_lat), kv = Mul(w.wkv, h);
    for (int64_t t = 0; t < T; ++t) {
      for (int hd = 0; hd < H; ++hd) {
        Vec head(q[t].begin() + hd * D, q[t].begin() + (hd + 1) * D);
        head = RmsNorm(head, nullptr, c.norm_eps);
        Rope(head.data() + nope, t, compress, false);
        std::copy(head.begin(), head.end(), q[t].begin() + hd * D);
      }
      kv[t] = RmsNorm(kv[t], &w.kv_norm, c.norm_eps);
      Rope(kv[t].data() + nope, t, compress, false);
    }
    if (spec.owns_compressor) Compress(layer, h);
    if (spec.runs_indexer) Index(layer, spec.kv_source, h, q_lat);
    Rows o(static_cast<size_t>(T), Vec(static_cast<size_t>(H) * D, 0));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<const Vec*> keyset;
      if (compress)
        for (int e : selected[spec.index_source][t]) keyset.push_back(&entries[spec.kv_source][e]);
      // The raw window; inside a bidirectional span it also reaches back to the span's start
      // and on to its end.
      int64_t first = std::max<int64_t>(0, t - c.sliding_window + 1), last = t;
      for (const TokenRange& span : spans) {
        if (t < span.begin || t >= span.end) continue;
        first = std::min<int64_t>(first, span.begin);
        last = span.end - 1;
      }
      for (int64_t p = first; p <= last; ++p) keyset.push_back(&kv[p]);
      for (int hd = 0; hd < H; ++hd) {
        const double* qh = q[t].data() + hd * D;
        Vec logits;
        double mx = w.attn_sink[hd];
        for (const Vec* k : keyset) {
          double dot = 0;
          for (int i = 0; i < D; ++i) dot += qh[i] * (*k)[i];
          logits.push_back(dot / std::sqrt(double(D)));
          mx = std::max(mx, logits.back());
        }
        double denom = std::exp(w.attn_sink[hd] - mx);
        for (double l : logits) denom += std::exp(l - mx);
        double* oh = o[t].data() + hd * D;
        for (size_t j = 0; j < keyset.size(); ++j)
          for (int i = 0; i < D; ++i) oh[i] += std::exp(logits[j] - mx) / denom * (*keyset[j])[i];
        Rope(oh + nope, t, compress, true);
      }
    }
    const int64_t group_in = static_cast<int64_t>(H) * D / c.o_groups;
    Rows z(static_cast<size_t>(T));
    for (int g = 0; g < c.o_groups; ++g) {
      Rows part(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) part[t].assign(o[t].begin() + g * group_in, o[t].begin() + (g + 1) * group_in);
      Rows zg = Mul(w.wo_a.RowSlice(g * c.o_lora_rank, (g + 1) * c.o_lora_rank), part);
      for (int64_t t = 0; t < T; ++t) z[t].insert(z[t].end(), zg[t].begin(), zg[t].end());
    }
    return Mul(w.wo_b, z);
  }

  Rows Expert(const model::ExpertWeights& e, const Rows& h) const {
    Rows g = Mul(e.w1, h), u = Mul(e.w3, h);
    const double lim = c.swiglu_limit;
    for (size_t t = 0; t < g.size(); ++t)
      for (size_t i = 0; i < g[t].size(); ++i) {
        const double gv = std::min(g[t][i], lim), uv = std::clamp(u[t][i], -lim, lim);
        g[t][i] = gv / (1 + std::exp(-gv)) * uv;
      }
    return Mul(e.w2, g);
  }

  Rows Moe(int layer, const Rows& h) const {
    const model::MoeWeights& w = model.layer(layer).moe;
    Rows logits = Mul(w.gate, h), out = Expert(w.shared, h);
    const int E = c.num_routed_experts, k = c.num_experts_per_token;
    for (int64_t t = 0; t < T; ++t) {
      Vec s(static_cast<size_t>(E));
      for (int e = 0; e < E; ++e) {
        const double x = logits[t][e] / c.gate_temp;
        s[e] = std::sqrt(x > 20 ? x : std::log1p(std::exp(x)));
      }
      const auto top = [&](const std::vector<float>& bias) {
        std::vector<int> order(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] + bias[a] > s[b] + bias[b]; });
        return order;
      };
      std::vector<int> order = top(w.gate_bias);
      if (IsImage(t) && !w.gate_bias_vl.empty()) {
        std::vector<int> vl = top(w.gate_bias_vl);
        std::vector<int> text_set(order.begin(), order.begin() + k), vl_set(vl.begin(), vl.begin() + k);
        std::sort(text_set.begin(), text_set.end());
        std::sort(vl_set.begin(), vl_set.end());
        vl_routing_changed += text_set != vl_set;
        order = vl;
      }
      double total = 0;
      for (int i = 0; i < k; ++i) total += s[order[i]];
      for (int i = 0; i < k; ++i) {
        Rows y = Expert(w.experts[order[i]], Rows{h[t]});
        const double weight = s[order[i]] / (total + 1e-20) * c.routed_scaling_factor;
        for (int64_t j = 0; j < c.hidden_size; ++j) out[t][j] += weight * y[0][j];
      }
    }
    return out;
  }

  Rows Logits() {
    entries.assign(model.plan().size(), {});
    keys = entries;
    selected.assign(model.plan().size(), {});
    candidates.assign(model.plan().size(), {});
    const int64_t d = c.hidden_size;
    Rows x(static_cast<size_t>(T), Vec(static_cast<size_t>(c.hc_dim())));
    for (int64_t t = 0; t < T; ++t)
      for (int i = 0; i < c.hc_mult; ++i)
        for (int64_t k = 0; k < d; ++k) x[t][i * d + k] = IsImage(t) ? embedded[t][k] : model.weights().embed.At(tokens[t], k);
    Rows lagged(static_cast<size_t>(T), Vec(static_cast<size_t>(c.hc_mult), 0));
    for (auto& p : lagged) p[0] = 1;
    for (int layer = 0; layer < c.num_layers; ++layer) {
      const model::LayerWeights& w = model.layer(layer);
      if (w.engram.embed.valid()) Engram(layer, &x);
      Rows h(static_cast<size_t>(T)), pre_a(T), post(T), comb(T);
      for (int64_t t = 0; t < T; ++t) {
        Mixes(w.hc_attn, x[t], &pre_a[t], &post[t], &comb[t]);
        h[t] = RmsNorm(Collapse(x[t], lagged[t]), &w.attn_norm, c.norm_eps);
      }
      Rows y = Attention(layer, h);
      for (int64_t t = 0; t < T; ++t) {
        Expand(&x[t], y[t], post[t], comb[t]);
        Mixes(w.hc_ffn, x[t], &lagged[t], &post[t], &comb[t]);
        h[t] = RmsNorm(Collapse(x[t], pre_a[t]), &w.ffn_norm, c.norm_eps);
      }
      y = Moe(layer, h);
      for (int64_t t = 0; t < T; ++t) Expand(&x[t], y[t], post[t], comb[t]);
    }
    Rows u(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) u[t] = RmsNorm(Collapse(x[t], lagged[t]), &model.weights().norm, c.norm_eps);
    return Mul(model.weights().head, u);
  }
};

TEST(V41ReferenceTest, EngineMatchesAStraightFromTheSpecForward) {
  const Model& model = testing::TestModelV41Engram();
  std::vector<int32_t> tokens = testing::RandomTokens(40, 2024);
  Reference ref{model, model.config(), tokens, static_cast<int64_t>(tokens.size()), {}, {}, {}, {}, {}, {}, 0, {}};
  Rows expected = ref.Logits();
  EngineOptions opt;
  opt.qat = false;  // the reference has no QAT rounding
  Engine engine(model, opt);
  auto state = engine.NewSequence();
  std::vector<float> got = testing::RunChunked(engine, state.get(), tokens, {40});
  std::vector<float> want;
  for (const Vec& row : expected)
    for (double v : row) want.push_back(static_cast<float>(v));
  EXPECT_GT(testing::MinRowCosine(got, want), 0.99999);
  int same_argmax = 0;
  for (int64_t t = 0; t < ref.T; ++t) {
    auto row = got.begin() + t * 1280, wrow = want.begin() + t * 1280;
    same_argmax += std::max_element(row, row + 1280) - row == std::max_element(wrow, wrow + 1280) - wrow;
  }
  EXPECT_EQ(same_argmax, ref.T);
  // The pruning the sequence was chosen for did happen in the reference.
  EXPECT_EQ(ref.selected[6][39].size(), 16u);       // top-16 of layer 6 (inside the candidates)
  int kept = 0;
  for (bool k : ref.candidates[4][39]) kept += k;
  EXPECT_EQ(kept, 4);                                // 4 of 5 blocks of 8 ratio-1 entries
}

// The reference over a picture prompt: its rows in place of the token embeddings, its
// bidirectional spans.
Reference PictureReference(const Model& model, const testing::ImagePrompt& prompt) {
  const int64_t d = model.config().hidden_size, T = static_cast<int64_t>(prompt.tokens.size());
  Reference ref{model, model.config(), prompt.tokens, T, {}, {}, {}, {}, {}, {}, 0, prompt.spans};
  ref.image.assign(static_cast<size_t>(T), false);
  ref.embedded.assign(static_cast<size_t>(T), {});
  for (size_t i = 0; i < prompt.embedded_rows.size(); ++i) {
    const int32_t t = prompt.embedded_rows[i];
    ref.image[t] = true;
    ref.embedded[t] = Vec(prompt.embeddings.begin() + static_cast<int64_t>(i) * d,
                          prompt.embeddings.begin() + static_cast<int64_t>(i + 1) * d);
  }
  return ref;
}

std::vector<float> Flatten(const Rows& rows) {
  std::vector<float> out;
  for (const Vec& row : rows)
    for (double v : row) out.push_back(static_cast<float>(v));
  return out;
}

// Every position's logits within cosine 0.99999 of the reference's, with the same argmax.
void ExpectMatches(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_GT(testing::MinRowCosine(got, want), 0.99999);
  for (size_t t = 0; t * 1280 < got.size(); ++t) {
    auto row = got.begin() + t * 1280, wrow = want.begin() + t * 1280;
    EXPECT_EQ(std::max_element(row, row + 1280) - row, std::max_element(wrow, wrow + 1280) - wrow) << "position " << t;
  }
}

// A picture's span between text: its rows replace the token embeddings, its positions route
// with bias_vl and are the pad to Engram; the logits of every position (the last one's decide
// the first token) match the reference.
// The reference's first-token logits for that prompt, checked in (testdata/): both the engine
// and the live reference must match them, so neither drifts unnoticed. FLASHSERVE_WRITE_FIXTURES=1
// rewrites the file (only when the generated test model changes on purpose).
constexpr char kFirstTokenFixture[] = FLASHSERVE_ROOT "/src/engine/testdata/picture_first_token_logits.f32";

std::vector<float> FirstTokenFixture(const std::vector<float>& live_last_row) {
  if (const char* write = std::getenv("FLASHSERVE_WRITE_FIXTURES"); write != nullptr && std::string(write) == "1") {
    std::ofstream(kFirstTokenFixture, std::ios::binary)
        .write(reinterpret_cast<const char*>(live_last_row.data()), static_cast<std::streamsize>(live_last_row.size() * 4));
  }
  std::vector<float> stored(1280);
  std::ifstream in(kFirstTokenFixture, std::ios::binary);
  in.read(reinterpret_cast<char*>(stored.data()), static_cast<std::streamsize>(stored.size() * 4));
  EXPECT_EQ(in.gcount(), 1280 * 4) << kFirstTokenFixture;
  return stored;
}

TEST(V41ReferenceTest, PicturesMatchTheReferenceToo) {
  const Model& model = testing::VisionModel();
  const testing::ImagePrompt prompt = testing::MakePrompt(model, 1);
  Reference ref = PictureReference(model, prompt);
  EngineOptions opt;
  opt.qat = false;
  Engine engine(model, opt);
  const std::vector<float> got = testing::RunPrompt(engine, prompt, {1000}), want = Flatten(ref.Logits());
  ExpectMatches(got, want);
  const std::vector<float> last_got(got.end() - 1280, got.end()), last_want(want.end() - 1280, want.end());
  const std::vector<float> stored = FirstTokenFixture(last_want);
  EXPECT_GT(testing::MinRowCosine(last_want, stored), 0.9999999) << "the live reference left the fixture";
  ExpectMatches(last_got, stored);
  // What the check rests on: the span is there, and bias_vl chose other experts somewhere.
  EXPECT_EQ(prompt.embedded_rows.size(), 17u);
  EXPECT_GT(ref.vl_routing_changed, 0);
}

// A bidirectional picture span (Vision-Exp's attention rule; the raw-window code is shared by
// V4 and V4.1) longer than the raw window: each span row sees its whole span and its usual
// window, text stays causal. One call or chunks around the span, the engine matches the
// reference, and the rule changes the logits (the causal reference is far from them).
TEST(V41ReferenceTest, BidirectionalSpansMatchTheReference) {
  const Model& model = testing::NarrowWindowVisionModel();
  testing::PictureShape shape;
  shape.bidirectional = true;
  shape.vit_h = 14;
  shape.vit_w = 23;  // 5 x 8 aligner grid: a 47-token span, the window 16
  const testing::ImagePrompt prompt = testing::MakePrompt(model, 3, shape);
  ASSERT_EQ(prompt.spans.size(), 1u);
  ASSERT_EQ(prompt.spans[0].end - prompt.spans[0].begin, 47);
  Reference ref = PictureReference(model, prompt);
  const std::vector<float> want = Flatten(ref.Logits());
  EngineOptions opt;
  opt.qat = false;
  Engine engine(model, opt);
  const std::vector<float> one_call = testing::RunPrompt(engine, prompt, {1000});
  ExpectMatches(one_call, want);
  EXPECT_TRUE(testing::BitEqual(one_call, testing::RunPrompt(engine, prompt, {40, 47, 7})));
  ref.spans.clear();
  const std::vector<float> causal = Flatten(ref.Logits());
  EXPECT_LT(testing::MinRowCosine(one_call, causal), 0.999);
  EXPECT_TRUE(std::equal(want.begin(), want.begin() + 40 * 1280, causal.begin()));  // text before it
}

}  // namespace
}  // namespace flashserve::engine
