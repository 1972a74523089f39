// The HTTP headers flashserve's own processes exchange (router <-> workers), named once.
// Plain constants; any thread.
#pragma once

namespace flashserve::protocol {

// A disaggregated request: the router names one transfer (32 hex digits) on both halves.
inline constexpr char kTransferHeader[] = "x-flashserve-transfer";
// On the prefill half: host:port of the decode worker's transfer receiver.
inline constexpr char kPrefillToHeader[] = "x-flashserve-prefill-to";
// On the router's responses: the worker that served the request.
inline constexpr char kWorkerHeader[] = "x-flashserve-worker";

}  // namespace flashserve::protocol
