// Pictures encoded by other workers (api/routes.h). On a `--role encode` worker: the encode half
// runs the named pictures through this worker's encode stage and streams their tower outputs to
// the prompt worker's transfer receiver (HELLO at once, so the receiver knows it is coming; an
// `image` object per picture; END), then answers a JSON summary. On the prompt worker: the
// request waits for its encode transfers (or their failure) before it starts.
#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/routes.h"
#include "base/bytes.h"
#include "net/api_error.h"
#include "protocol/headers.h"
#include "serve/encoder_cache.h"
#include "transfer/sender.h"

namespace flashserve::api {

namespace {

constexpr double kSenderDrainSeconds = 60;  // how long an encode half waits for its END to go out

// "0,2,5" -> indices below `count`; false on anything else.
bool ParseIndices(const std::string& text, size_t count, std::vector<size_t>* out) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos) return false;
    const size_t index = std::stoul(item);
    if (index >= count) return false;
    out->push_back(index);
    pos = end + 1;
  }
  return !out->empty();
}

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    if (end > pos) out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Sends the pictures and END, answers the router with what was sent.
void ShipPictures(const serve::ModelInfo& info, const std::shared_ptr<transfer::TransferSender>& sender,
                  const ExchangePtr& exchange, const std::vector<size_t>& indices,
                  base::Result<std::vector<serve::EncodedPicture>> pictures, net::ErrorDialect errors) {
  if (!pictures.ok()) {
    sender->Abort("encoding failed: " + pictures.error().message());
    return exchange->Post([exchange, e = net::FromError(pictures.error()), errors] {
      exchange->Respond(net::ErrorResponse(e, errors));
    });
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < pictures->size(); ++i) {
    const serve::EncodedPicture& p = (*pictures)[i];
    const int64_t rows = static_cast<int64_t>(p.rows->size()) / info.hidden_size;
    if (!sender->Send(protocol::KvObjectKind::kImage, p.key, rows, serve::EncodeImageRows(*p.rows, info.hidden_size)).ok())
      break;  // the transfer failed: the prompt worker encodes what it lacks
    list.push_back({{"index", indices[i]}, {"key", base::HexEncode(p.key)}, {"rows", rows}, {"cached", p.cached}});
  }
  const bool finished = sender->Finish().ok();
  std::thread([sender] { sender->Wait(kSenderDrainSeconds).ok(); }).detach();  // alive until END is out
  nlohmann::ordered_json body = {{"object", "encode"}, {"images", list}, {"transfer_finished", finished}};
  exchange->Post([exchange, text = body.dump()] {
    net::HttpResponse r;
    r.status = 200;
    r.body = text;
    r.headers.emplace_back("Content-Type", "application/json");
    exchange->Respond(std::move(r));
  });
}

}  // namespace

void StartEncodeHalf(const RouteContext& ctx, const ExchangePtr& exchange, std::vector<protocol::ImageInput> images,
                     net::ErrorDialect errors) {
  const net::HttpRequest& req = exchange->request();
  const std::string to = req.Header(protocol::kEncodeToHeader);
  transfer::TransferId id{};
  if (to.empty() || !transfer::ParseTransferId(req.Header(protocol::kTransferHeader), &id)) {
    return exchange->Respond(net::ErrorResponse(
        net::InvalidRequest("this worker (--role encode) only encodes pictures for other workers: send requests to "
                            "the router, or to a worker started with --role both"),
        errors));
  }
  std::vector<size_t> indices;
  const std::string wanted = req.Header(protocol::kEncodeImagesHeader);
  if (wanted.empty()) {
    for (size_t i = 0; i < images.size(); ++i) indices.push_back(i);
  } else if (!ParseIndices(wanted, images.size(), &indices)) {
    return exchange->Respond(net::ErrorResponse(
        net::InvalidRequest(std::string(protocol::kEncodeImagesHeader) + " must list pictures of the request (0-based)"),
        errors));
  }
  std::vector<protocol::ImageInput> selected;
  for (size_t i : indices) selected.push_back(std::move(images[i]));
  transfer::SenderOptions options;
  options.address = to;
  options.transfer_id = id;
  const serve::ModelInfo info = ctx.service->Info();
  options.hello.model_fingerprint = info.fingerprint;
  options.hello.expected_objects = static_cast<int64_t>(selected.size());
  auto sender = transfer::TransferSender::Start(options);
  if (!sender.ok()) return exchange->Respond(net::ErrorResponse(net::FromError(sender.error()), errors));
  std::shared_ptr<transfer::TransferSender> shared = std::move(sender).value();
  ctx.service->EncodeImages(std::move(selected), [info, shared, exchange, indices, errors](auto pictures) {
    ShipPictures(info, shared, exchange, indices, std::move(pictures), errors);
  });
}

bool AwaitEncodeTransfers(const RouteContext& ctx, const ExchangePtr& exchange, std::function<void()> then,
                          net::ErrorDialect errors) {
  const std::string header = exchange->request().Header(protocol::kEncodeTransfersHeader);
  if (header.empty()) return false;
  std::vector<transfer::TransferId> ids;
  for (const std::string& hex : SplitComma(header)) {
    if (!transfer::ParseTransferId(hex, &ids.emplace_back()) || ids.size() > 64) {
      exchange->Respond(net::ErrorResponse(
          net::InvalidRequest(std::string(protocol::kEncodeTransfersHeader) + " must be transfer ids (32 hex digits), "
                              "comma-separated"),
          errors));
      return true;
    }
  }
  if (ctx.inbox == nullptr || ids.empty()) return false;  // nothing can arrive: encode here
  auto remaining = std::make_shared<std::atomic<size_t>>(ids.size());
  auto start = std::make_shared<std::function<void()>>(std::move(then));
  for (const transfer::TransferId& id : ids) {
    ctx.inbox->Expect(id, [exchange, remaining, start](const serve::TransferInbox::Outcome&) {
      // Whatever arrived is in the encoder cache; what did not is encoded by this worker.
      if (remaining->fetch_sub(1) == 1) exchange->Post([start] { (*start)(); });
    });
  }
  return true;
}

}  // namespace flashserve::api
