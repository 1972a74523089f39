// Pictures into prompt spans (api/image_inputs.h).
#include "api/image_inputs.h"

#include <fmt/format.h>

#include "dialect/dialect_request.h"
#include "vision/preprocess.h"

namespace flashserve::api {
namespace {

// Field paths of the image parts in the order the encoder renders them (message order).
std::vector<std::string> ImagePaths(const protocol::ChatRequest& chat) {
  std::vector<std::string> paths;
  for (size_t m = 0; m < chat.messages.size(); ++m) {
    const auto& parts = chat.messages[m].content.parts;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].type != protocol::PartType::kImage) continue;
      paths.push_back(parts[p].field_path.empty() ? fmt::format("messages[{}].content[{}]", m, p) : parts[p].field_path);
    }
  }
  return paths;
}

net::ApiError ImageError(const std::string& path, const base::Error& error) {
  net::ApiError e = net::InvalidRequest(fmt::format("{}: {}", path, error.message()), path, "invalid_image");
  if (error.code() == base::ErrorCode::kResourceExhausted) e.code = "image_too_large";
  return e;
}

// One picture: bytes, pixels, plan, resize, patches, key.
std::optional<net::ApiError> PreparePicture(const ImageOptions& options, const std::string& source,
                                            const std::string& path, protocol::ImageInput* out,
                                            vision::ImagePlan* plan) {
  auto bytes = vision::LoadImageSource(source, options.sources);
  if (!bytes.ok()) return ImageError(path, bytes.error());
  auto pixels = vision::DecodeImage(*bytes, options.limits);
  if (!pixels.ok()) return ImageError(path, pixels.error());
  auto prepared = vision::PrepareImage(*pixels, options.params, options.tower_checksum);
  if (!prepared.ok()) return ImageError(path, prepared.error());
  *plan = prepared->plan;
  out->key = prepared->key;
  out->vit_h = plan->vit_h;
  out->vit_w = plan->vit_w;
  out->patches = vision::PatchValues(*prepared, options.params.patch_size);
  return std::nullopt;
}

}  // namespace

std::optional<net::ApiError> ImagesAccepted(const ImageOptions& options, const protocol::ChatRequest& chat) {
  if (options.enabled) return std::nullopt;
  const std::vector<std::string> paths = ImagePaths(chat);
  if (paths.empty()) return std::nullopt;
  return dialect::Unsupported(paths[0], "image inputs need a model with a vision tower on a worker that runs whole requests; " +
                                   options.disabled_reason);
}

std::optional<net::ApiError> ExpandImages(const ImageOptions& options, const protocol::ChatRequest& chat,
                                          const encoding::EncodedPrompt& prompt, int32_t placeholder,
                                          std::vector<int32_t>* ids, std::vector<protocol::ImageInput>* images) {
  const std::vector<std::string> sources = encoding::ImageSources(prompt);
  if (sources.empty()) return std::nullopt;
  std::vector<std::string> paths = ImagePaths(chat);
  paths.resize(sources.size(), "messages");
  if (auto e = ImagesAccepted(options, chat)) return e;
  if (static_cast<int>(sources.size()) > options.max_images) {
    return net::InvalidRequest(fmt::format("{} images in one request; this server accepts at most {} (--max-images)",
                                           sources.size(), options.max_images),
                               paths[static_cast<size_t>(options.max_images)], "too_many_images");
  }
  std::vector<int32_t> out;
  out.reserve(ids->size());
  size_t next = 0;
  for (int32_t id : *ids) {
    if (id != placeholder || next >= sources.size()) {
      out.push_back(id);
      continue;
    }
    protocol::ImageInput image;
    vision::ImagePlan plan;
    if (auto e = PreparePicture(options, sources[next], paths[next], &image, &plan)) return e;
    image.start = static_cast<int64_t>(out.size());
    const vision::ImageSpan span = vision::BuildSpan(plan, options.params.layout, image.start);
    for (vision::SpanRole role : span.roles) image.roles.push_back(static_cast<uint8_t>(role));
    image.image_rows = span.image_rows;
    out.insert(out.end(), span.roles.size(), options.image_token);
    images->push_back(std::move(image));
    ++next;
  }
  if (next != sources.size()) return net::Internal("the prompt's image placeholders do not match its images");
  *ids = std::move(out);
  return std::nullopt;
}

}  // namespace flashserve::api
