// The pictures of a request body as the router sees them, without decoding them: each picture's
// source text (data URL, URL or file id) in prompt order, for placing pictures on encode workers
// by affinity (the same picture goes to the same worker, whose encoder cache holds it). Reads
// Chat Completions `messages` (image_url parts), Messages `messages` (image blocks, also inside
// tool_result content) and Responses `input` (input_image). Pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashserve::router {

std::vector<std::string> ImageSources(const nlohmann::ordered_json& body);

}  // namespace flashserve::router
