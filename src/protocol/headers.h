// The HTTP headers flashserve's own processes exchange (router <-> workers), named once.
// Plain constants; any thread.
#pragma once

namespace flashserve::protocol {

// A disaggregated request: the router names one transfer (32 hex digits) on both halves.
inline constexpr char kTransferHeader[] = "x-flashserve-transfer";
// On the prefill half: host:port of the decode worker's transfer receiver.
inline constexpr char kPrefillToHeader[] = "x-flashserve-prefill-to";
// Pictures encoded by `--role encode` workers. On the encode half: host:port of the transfer
// receiver that takes the tower outputs (the transfer is named by kTransferHeader), and which of
// the request's pictures to encode (0-based, prompt order, comma-separated; absent = all).
inline constexpr char kEncodeToHeader[] = "x-flashserve-encode-to";
inline constexpr char kEncodeImagesHeader[] = "x-flashserve-encode-images";
// On the half that computes the prompt (both or prefill): the transfers, comma-separated, that
// bring its pictures' tower outputs; it waits for them, then encodes whatever did not arrive.
inline constexpr char kEncodeTransfersHeader[] = "x-flashserve-encode-transfers";
// On the router's responses: the worker that served the request.
inline constexpr char kWorkerHeader[] = "x-flashserve-worker";
// On responses whose request named hosted tools the server does not run (`--hosted-tools drop`):
// those tools, comma-separated. The router passes it on.
inline constexpr char kDroppedToolsHeader[] = "x-flashserve-dropped-tools";
// On a worker's 429: "tenant" when the tenant's own limits refused it (the router passes it on
// without trying another worker), absent when the worker itself is full.
inline constexpr char kLimitHeader[] = "x-flashserve-limit";

}  // namespace flashserve::protocol
