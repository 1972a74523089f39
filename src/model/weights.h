// The DeepSeek-V4 weights of a checkpoint, by role: big matrices are views into the mapped
// shards (no copies); small vectors (norms, sinks, mHC, ape, biases) are converted to float.
// Built once by LoadModelWeights, which checks every expected tensor's presence, dtype and
// shape; immutable afterwards and shared read-only by the engine threads.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "model/config.h"
#include "model/layer_plan.h"
#include "model/matrix.h"
#include "model/safetensors.h"

namespace flashserve::model {

struct CompressorWeights {
  Matrix wkv, wgate;          // [c*D, d]; V4.1 ratio 1 has no wgate (invalid matrix)
  std::vector<float> ape;     // [ratio * c*D]; empty in V4.1
  std::vector<float> norm;    // [D]
};

struct IndexerWeights {
  Matrix wq_b;                // [H_I*D_I, r_q]
  Matrix weights_proj;        // [H_I, d]
  CompressorWeights compressor;  // V4: D = D_I, always overlapping (ratio 4)
  Matrix wk;                  // V4.1 KV sources: index keys from the latent [D_I, D]
  std::vector<float> k_norm;  // V4.1 KV sources: [D_I]
};

struct AttentionWeights {
  Matrix wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm, attn_sink;
  CompressorWeights compressor;  // ratio > 0
  IndexerWeights indexer;        // CSA only
};

struct ExpertWeights {
  Matrix w1, w2, w3;  // gate [F, d], down [d, F], up [F, d]
};

struct MoeWeights {
  Matrix gate;                       // [E, d]
  std::vector<float> gate_bias;      // [E], score-routed layers
  std::vector<float> gate_bias_vl;   // [E], image-span tokens (V4.1; Vision-Exp, hash layers too)
  std::vector<int32_t> tid2eid;      // [vocab * k], hash layers
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
};

struct HcWeights {
  std::vector<float> fn;     // [mix, hc*d]
  std::vector<float> base;   // [mix]
  std::vector<float> scale;  // [3] (or [1] for heads)
};

struct MtpExtraWeights {
  Matrix e_proj, h_proj;                  // [d, d]
  std::vector<float> enorm, hnorm, norm;  // [d]
  HcWeights hc_head;
};

// The DSpark drafter's weights besides its stages' blocks (v4-architecture.md 4.7): the context
// projection on stage 0, the head, Markov head and confidence head on the last stage.
struct DsparkWeights {
  Matrix main_proj;                // [d, stages * d]: the target layers' features -> context
  std::vector<float> main_norm;    // [d]
  std::vector<float> norm;         // [d]
  HcWeights hc_head;
  Matrix markov_w1, markov_w2;     // [vocab, r]: the previous token's row; its bias on every logit
  std::vector<float> confidence;   // [d + r]: sigmoid(w . [h_k ; w1[x_k-1]])
};

// V4.1 Engram at a layer (v4-architecture.md 5.4); `embed` stays in the mapped file and only
// the rows a token hashes to are read.
struct EngramWeights {
  Matrix embed;                          // [rows, head_dim]: FP8 + per-32 ue8m0 scales, or float
  Matrix wkv;                            // [(hc + 1) * d, (max_ngram - 1) * heads * head_dim]
  std::vector<float> q_weight, k_weight;  // [hc * d]
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  EngramWeights engram;  // V4.1 Engram layers only (engram.embed.valid())
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights moe;
  MtpExtraWeights mtp;  // MTP layers only
};

// The vision tower (ViT), the aligner and the learned span vectors; present when the config has a
// tower. Linears are views into the mapped shards (BF16 in the released checkpoints).
struct VisionBlockWeights {
  std::vector<float> norm1, norm2;  // [dim]
  Matrix wqkv, wo;                  // [3 dim, dim], [dim, dim]
  std::vector<float> wqkv_bias, wo_bias;
  Matrix w1, w2;                    // SwiGLU: [2 inter, dim] (gate rows, then up rows), [dim, inter]
};

struct VisionWeights {
  Matrix patch_embed;               // [dim, 3 * patch * patch]
  std::vector<float> patch_bias;    // [dim]
  std::vector<VisionBlockWeights> blocks;
  std::vector<float> norm;          // [dim]
  Matrix aligner_w1, aligner_w2;    // [d, dim * ratio^2], [d, d]
  std::vector<float> aligner_b1, aligner_b2;
  std::vector<float> image_start, image_end, image_newline, image_pad;  // [d]; pad: Vision-Exp only
};

struct ModelWeights {
  Matrix embed;  // [vocab, d]
  Matrix head;   // [vocab, d]
  std::vector<float> norm;
  HcWeights hc_head;                 // V4 only (V4.1 collapses with the last FFN site's pre)
  std::vector<LayerWeights> layers;  // trunk layers then MTP layers (LayerPlan order)
  VisionWeights vision;              // config.vision.present() only
  DsparkWeights dspark;              // config.dspark.present() only
  size_t num_tensors = 0;
  size_t total_bytes = 0;
};

// Every tensor the plan expects, checked by name; errors name the tensor and the mismatch.
base::Result<ModelWeights> LoadModelWeights(const Checkpoint& ckpt, const ModelConfig& config,
                                            const LayerPlan& plan);

}  // namespace flashserve::model
