// Synthetic screenshots for the image workload: an RGB PNG whose pixels follow a seed (flat
// panels with noise, so it compresses like a screen, not like static), as a data URL. Pure
// function, any thread.
#pragma once

#include <cstdint>
#include <string>

namespace flashserve::loadgen {

// "data:image/png;base64,..." of a width x height picture; the same seed gives the same bytes.
std::string PngDataUrl(int width, int height, uint64_t seed);

}  // namespace flashserve::loadgen
