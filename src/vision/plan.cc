// Image token plans (vision/plan.h), step for step as the published preprocessing computes them.
#include "vision/plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace flashserve::vision {
namespace {

using base::ErrorCode;

constexpr int kCompressPadTo = 4;  // Vision-Exp aligns blocks to the compressor's groups

struct Grid {
  int h = 0, w = 0, tokens = 0;
};

int CeilDiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

Grid V41Grid(int64_t best_h, int64_t best_w, int p, int r) {
  Grid g{CeilDiv(best_h / p, r), CeilDiv(best_w / p, r), 0};
  g.tokens = g.h * (g.w + 1) + 2;
  return g;
}

Grid ExpGrid(int64_t best_h, int64_t best_w, int p, int r) {
  Grid g = V41Grid(best_h, best_w, p, r);
  if (g.h % 2 == 1) g.tokens += g.w + 1;
  g.tokens += (g.h + 1) / 2 * (g.w + 1) % 2 * 2;
  return g;
}

struct Size {
  int64_t h = 0, w = 0;
};

// V4.1 solve_resize_ratio: the largest aspect-preserving size whose grid fits the budget.
Size SolveV41(double height, double width, int p, int r, int budget) {
  const double ratio = height / width;
  const double max_w = std::sqrt((budget - 2) / ratio + 0.25) - 0.5;
  const double max_h = max_w * ratio;
  const int64_t cell = static_cast<int64_t>(p) * r;
  if (max_w < 1.0) return {(budget - 2) / 2 * cell, cell};
  if (max_h < 1.0) return {cell, (budget - 3) * cell};
  const double beta = std::min(static_cast<double>(static_cast<int64_t>(std::floor(max_w)) * cell) / width,
                               static_cast<double>(static_cast<int64_t>(std::floor(max_h)) * cell) / height);
  return {static_cast<int64_t>(std::floor(height * beta / p)) * p,
          static_cast<int64_t>(std::floor(width * beta / p)) * p};
}

// Vision-Exp solve_resize_ratio (even row counts, at least two rows).
base::Result<Size> SolveExp(double height, double width, int p, int r, int budget) {
  const double ratio = height / width;
  const double max_w_f = std::sqrt((budget - 2) / ratio + 0.25) - 0.5;
  const double max_h_f = max_w_f * ratio;
  const int64_t cell = static_cast<int64_t>(p) * r;
  if (max_w_f < 1.0) {
    int64_t max_h = (budget - 2) / 2;
    if (max_h % 2 == 1) --max_h;
    return Size{max_h * cell, cell};
  }
  if (max_h_f < 2.0) {
    const int64_t max_w = (budget - 2) / 2 - 1;
    if (max_w <= 1) return base::MakeError(ErrorCode::kInvalidArgument, "image token budget too small");
    return Size{2 * cell, max_w * cell};
  }
  const int64_t max_w = static_cast<int64_t>(std::floor(max_w_f));
  int64_t max_h = static_cast<int64_t>(std::floor(max_h_f));
  if (max_h % 2 == 1) --max_h;
  const double beta = std::min(static_cast<double>(max_w * cell) / width, static_cast<double>(max_h * cell) / height);
  return Size{static_cast<int64_t>(std::floor(height * beta / p)) * p,
              static_cast<int64_t>(std::floor(width * beta / p)) * p};
}

base::Status FitV41(double height, double width, const VisionParams& v, Size& best, Grid& grid) {
  grid = V41Grid(best.h, best.w, v.patch_size, v.downsample_ratio);
  if (grid.tokens <= v.max_n_token) return base::Status::Ok();
  best = SolveV41(height, width, v.patch_size, v.downsample_ratio, v.max_n_token);
  grid = V41Grid(best.h, best.w, v.patch_size, v.downsample_ratio);
  if (grid.tokens > v.max_n_token || best.h <= 0 || best.w <= 0) {
    return base::MakeError(ErrorCode::kInvalidArgument, "no image size fits the token budget");
  }
  return base::Status::Ok();
}

base::Status FitExp(double height, double width, const VisionParams& v, Size& best, Grid& grid) {
  const int limit = v.max_n_token - (kCompressPadTo - 1);
  grid = ExpGrid(best.h, best.w, v.patch_size, v.downsample_ratio);
  for (int budget = limit; grid.tokens > limit; --budget) {
    if (budget < 8) return base::MakeError(ErrorCode::kInvalidArgument, "no image size fits the token budget");
    FS_ASSIGN_OR_RETURN(best, SolveExp(height, width, v.patch_size, v.downsample_ratio, budget));
    grid = ExpGrid(best.h, best.w, v.patch_size, v.downsample_ratio);
  }
  return base::Status::Ok();
}

}  // namespace

base::Result<ImagePlan> PlanImage(int64_t width, int64_t height, const VisionParams& v) {
  if (width <= 0 || height <= 0) {
    return base::MakeError(ErrorCode::kInvalidArgument, fmt::format("image size {}x{} is empty", width, height));
  }
  if (v.patch_size <= 0 || v.downsample_ratio <= 0 || v.max_n_token < 8) {
    return base::MakeError(ErrorCode::kInvalidArgument, "bad vision parameters");
  }
  const int p = v.patch_size;
  double w = static_cast<double>(width), h = static_cast<double>(height);
  if (v.max_wh_ratio > 0 && w > h * v.max_wh_ratio) w = h * v.max_wh_ratio;
  if (w * h < static_cast<double>(v.min_pixels)) {
    const double scale = std::pow(static_cast<double>(v.min_pixels) / (w * h), 0.5);
    w = std::trunc(w * scale);
    h = std::trunc(h * scale);
  }
  Size best{static_cast<int64_t>(std::ceil(h / p)) * p, static_cast<int64_t>(std::ceil(w / p)) * p};
  Grid grid;
  if (v.layout == SpanLayout::kV41) {
    FS_RETURN_IF_ERROR(FitV41(h, w, v, best, grid));
  } else {
    FS_RETURN_IF_ERROR(FitExp(h, w, v, best, grid));
  }
  ImagePlan plan;
  plan.source_width = width;
  plan.source_height = height;
  plan.resized_width = static_cast<int>(best.w);
  plan.resized_height = static_cast<int>(best.h);
  plan.stretch = v.max_wh_ratio > 0 && width >= static_cast<int64_t>(v.max_wh_ratio) * height;
  plan.vit_h = static_cast<int>(best.h / p);
  plan.vit_w = static_cast<int>(best.w / p);
  plan.llm_h = grid.h;
  plan.llm_w = grid.w;
  plan.span_tokens = grid.tokens;
  return plan;
}

namespace {

ImageSpan V41Span(const ImagePlan& plan) {
  ImageSpan span;
  span.roles.push_back(SpanRole::kStart);
  for (int y = 0; y < plan.llm_h; ++y) {
    for (int x = 0; x < plan.llm_w; ++x) {
      span.roles.push_back(SpanRole::kImage);
      span.image_rows.push_back(y * plan.llm_w + x);
    }
    span.roles.push_back(SpanRole::kNewline);
  }
  span.roles.push_back(SpanRole::kEnd);
  return span;
}

// Vision-Exp: rows padded to an even count, then read two rows at a time column by column.
ImageSpan ExpSpan(const ImagePlan& plan, int64_t start) {
  const int pad_h = plan.llm_h % 2;
  const int rows = plan.llm_h + pad_h;
  const int row_len = plan.llm_w + 1;
  const int pad_last = rows / 2 * row_len % 2 * 2;
  ImageSpan span;
  const int compress_pad = kCompressPadTo - 1 - static_cast<int>(start % kCompressPadTo);
  span.roles.assign(compress_pad, SpanRole::kPad);
  span.roles.push_back(SpanRole::kStart);
  for (int pair = 0; pair < rows / 2; ++pair) {
    for (int col = 0; col < row_len; ++col) {
      for (int half = 0; half < 2; ++half) {
        const int row = pair * 2 + half;
        if (row >= plan.llm_h) {
          span.roles.push_back(SpanRole::kPad);
        } else if (col == plan.llm_w) {
          span.roles.push_back(SpanRole::kNewline);
        } else {
          span.roles.push_back(SpanRole::kImage);
          span.image_rows.push_back(row * plan.llm_w + col);
        }
      }
    }
  }
  span.roles.insert(span.roles.end(), pad_last, SpanRole::kPad);
  span.roles.push_back(SpanRole::kEnd);
  return span;
}

}  // namespace

ImageSpan BuildSpan(const ImagePlan& plan, SpanLayout layout, int64_t start) {
  return layout == SpanLayout::kV41 ? V41Span(plan) : ExpSpan(plan, start);
}

}  // namespace flashserve::vision
