// Loopback stand-ins for the HTTP receivers the sinks talk to, each behaving
// as its public API documentation says, over HTTPS with the test CA:
//   ElasticsearchPeer  POST /_bulk: create actions answered item by item
//                      (201 created, 409 version conflict for an existing
//                      _id, injected 429 / 400 mapping errors; "errors" true
//                      only when an item failed).
//   SplunkHecPeer      POST /services/collector/event and, with indexer
//                      acknowledgement on, the channel header and
//                      /services/collector/ack; HEC's JSON error codes.
//   WebhookPeer        checks the bearer token and extra headers (401/403).
// A peer can go down (stop) and come back on the same port (start).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/siem/test_pki.h"

namespace gpuguard::testing {

struct PeerRequest {
    std::string path;
    std::string query_channel;                   // ?channel= (HEC)
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;
    int status = 0;  // what the peer answered
    std::string header(const std::string& lower_name) const;
};

struct PeerResponse {
    int status = 200;
    std::string body;
};

class HttpPeer {
  public:
    // `pki` null: plain HTTP, else HTTPS with pki's server certificate.
    // `port` 0: a free one. Call start().
    explicit HttpPeer(const TestPki* pki, uint16_t port = 0);
    virtual ~HttpPeer();
    HttpPeer(const HttpPeer&) = delete;
    HttpPeer& operator=(const HttpPeer&) = delete;

    // Listens on the port (again). False (and a test failure) when it cannot.
    bool start();
    // Down: the port refuses connections until start().
    void stop();

    std::string url() const;  // https://127.0.0.1:PORT (http:// without a PKI)
    uint16_t port() const { return port_; }
    std::vector<PeerRequest> requests() const;

  protected:
    // Answers one request; called with mutex_ held.
    virtual PeerResponse handle(const PeerRequest& request) = 0;
    mutable std::mutex mutex_;

  private:
    struct Server;
    const TestPki* pki_;
    uint16_t port_;
    std::unique_ptr<Server> server_;
    std::vector<PeerRequest> requests_;
};

class ElasticsearchPeer final : public HttpPeer {
  public:
    // Requests must carry "Authorization: ApiKey <api_key>".
    ElasticsearchPeer(const TestPki* pki, std::string api_key, uint16_t port = 0);

    // The next `times` create actions for `id` answer `status` (429 with
    // es_rejected_execution_exception, 400 with a mapping error) instead of
    // indexing; times < 0: every one.
    void fail_item(const std::string& id, int status, int times);
    // A document that exists already: a create for it answers 409.
    void preload(const std::string& id);

    std::map<std::string, nlohmann::json> documents() const;  // by _id
    std::map<std::string, int> attempts() const;              // create actions per _id
    std::vector<size_t> batch_sizes() const;                  // actions per accepted request

  private:
    PeerResponse handle(const PeerRequest& request) override;
    PeerResponse bulk(const std::string& body);

    struct Fault {
        int status = 0;
        int times = 0;
    };
    std::string api_key_;
    std::map<std::string, nlohmann::json> documents_;
    std::map<std::string, int> attempts_;
    std::map<std::string, Fault> faults_;
    std::vector<size_t> batch_sizes_;
    uint64_t seq_no_ = 0;
};

struct HecOptions {
    std::string token;
    bool acks = true;               // the token has indexer acknowledgement on
    int ack_after_queries = 2;      // an ackId reads true from this query of it on
    int lose_batches = 0;           // the first N batches are never indexed nor acknowledged
    std::set<std::string> indexes;  // the indexes the token may write; empty: any
};

class SplunkHecPeer final : public HttpPeer {
  public:
    SplunkHecPeer(const TestPki* pki, HecOptions options, uint16_t port = 0);

    std::vector<nlohmann::json> events() const;  // indexed, in arrival order
    std::vector<size_t> batch_sizes() const;     // events per accepted POST
    std::set<std::string> channels() const;      // data channels seen on event POSTs
    size_t ack_queries() const;

  private:
    PeerResponse handle(const PeerRequest& request) override;
    PeerResponse event(const PeerRequest& request, const std::string& channel);
    PeerResponse ack(const PeerRequest& request, const std::string& channel);

    struct Pending {
        bool lost = false;
        int queries = 0;
    };
    HecOptions options_;
    std::vector<nlohmann::json> events_;
    std::vector<size_t> batch_sizes_;
    std::set<std::string> channels_;
    std::map<std::string, uint64_t> next_ack_id_;                      // per channel
    std::map<std::string, std::map<uint64_t, Pending>> pending_acks_;  // per channel
    size_t ack_queries_ = 0;
    int batches_ = 0;
};

class WebhookPeer final : public HttpPeer {
  public:
    // Requests must carry "Authorization: Bearer <token>" and each of
    // `required_headers` (name -> value): 401 without the token, 403 with a
    // wrong one or a missing or wrong header.
    WebhookPeer(const TestPki* pki, std::string token,
                std::map<std::string, std::string> required_headers, uint16_t port = 0);

    std::vector<nlohmann::json> records() const;  // accepted, in arrival order
    std::vector<size_t> batch_sizes() const;

  private:
    PeerResponse handle(const PeerRequest& request) override;

    std::string token_;
    std::map<std::string, std::string> required_headers_;
    std::vector<nlohmann::json> records_;
    std::vector<size_t> batch_sizes_;
};

}  // namespace gpuguard::testing
