// Transports move a batch of formatted records to one destination and say
// how much of it is delivered. Each runs on its sink's thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/siem/siem.h"
#include "siem/record_queue.h"

namespace gpuguard::siem {

// The first records of the batch are done: delivered, or refused by the
// receiver for good (malformed; counted as dropped). A receiver that answers
// per item (Elasticsearch _bulk) may also settle records past that prefix:
// `done_later` holds their batch indexes, and they are not sent again.
// `delivered` and `rejected` count every done record, prefix and later ones;
// the prefix is `delivered + rejected - done_later.size()` long. When
// `error` is set the records not done must be retried later.
struct Delivery {
    size_t delivered = 0;
    size_t rejected = 0;
    size_t bytes = 0;
    std::vector<size_t> done_later;
    std::string error;
    std::string rejection;      // why records were rejected, for the log
    bool retry_singly = false;  // the receiver refused the batch as a whole: resend one by one
};

class Transport {
  public:
    virtual ~Transport() = default;
    Transport() = default;
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    virtual Delivery deliver(const std::vector<QueuedRecord>& batch) = 0;
};

// Builds the transport for a validated sink. Connections are opened lazily
// by deliver(), so an unreachable receiver is not an error here; a broken
// TLS setup (unreadable CA, bad key) is (kInvalidArgument).
Result<std::unique_ptr<Transport>> make_transport(const SinkConfig& sink);

Result<std::unique_ptr<Transport>> make_stream_transport(const SinkConfig& sink);
Result<std::unique_ptr<Transport>> make_datagram_transport(const SinkConfig& sink);
Result<std::unique_ptr<Transport>> make_local_transport(const SinkConfig& sink);
Result<std::unique_ptr<Transport>> make_http_transport(const SinkConfig& sink);

// "host:port" or "[v6addr]:port" -> host and port. kInvalidArgument otherwise.
Result<std::pair<std::string, uint16_t>> split_host_port(const std::string& address);

}  // namespace gpuguard::siem
