// Image inputs of a chat prompt: every image placeholder the encoder wrote becomes the picture's
// span of image-token ids (vision/plan.h), and the picture itself a protocol::ImageInput (decoded,
// planned, resized, patches and content key) that the serving loop runs through the tower.
// Runs on the request's handler thread; pure apart from reading allowed file:// sources.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "encoding/prompt.h"
#include "net/api_error.h"
#include "protocol/chat.h"
#include "protocol/generate.h"
#include "vision/decode.h"
#include "vision/fetch.h"
#include "vision/plan.h"
#include "vision/source.h"

namespace flashserve::api {

struct ImageOptions {
  bool enabled = false;          // the served model has a vision tower this server runs
  std::string disabled_reason = "the served model is text-only";
  vision::VisionParams params;   // the checkpoint's preprocessing
  int32_t image_token = -1;      // the id every span position carries (config image_token_id)
  std::string tower_checksum;    // part of every content key
  vision::ImageLimits limits;    // per picture
  vision::SourcePolicy sources;  // data URLs always; file:// under a root
  vision::FetchPolicy fetch;     // http(s) URLs, fetched ahead of the route (api/image_fetch.h)
  int fetch_threads = 4;
  int max_images = 16;           // per request
};

// A 400 naming the first image part when the served model takes no images.
std::optional<net::ApiError> ImagesAccepted(const ImageOptions& options, const protocol::ChatRequest& chat);

// Replaces the placeholder ids (`placeholder`, one per image piece of `prompt`) in *ids with the
// pictures' spans and appends the pictures to *images. Errors are 400s naming the image's field
// path (messages[m].content[p]) and the reason.
std::optional<net::ApiError> ExpandImages(const ImageOptions& options, const protocol::ChatRequest& chat,
                                          const encoding::EncodedPrompt& prompt, int32_t placeholder,
                                          std::vector<int32_t>* ids, std::vector<protocol::ImageInput>* images);

}  // namespace flashserve::api
