// Active verification's pure half (gpuguard/netintel/pool_probe.h): the
// first message of each dialect, what answers from pools (as their
// protocols document them) and from other servers say, and the addresses
// never probed.
#include "gpuguard/netintel/pool_probe.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuguard::agent::pool_probe {
namespace {

Verdict answered(Dialect dialect, const std::string& answer, bool closed = false) {
    return classify(dialect, Exchange{answer, closed, !closed, "", 3000});
}

TEST(PoolProbeMessages, each_dialect_sends_one_json_rpc_line_a_pool_of_it_answers) {
    for (const auto dialect : kDialects) {
        const std::string message = first_message(dialect);
        ASSERT_FALSE(message.empty());
        EXPECT_EQ(message.back(), '\n');
        EXPECT_EQ(message.find('\n'), message.size() - 1) << "one line";
        const auto json = nlohmann::json::parse(message);
        EXPECT_EQ(json["id"], 1);
        EXPECT_TRUE(json["params"].is_array() || json["params"].is_object());
    }
    const auto stratum1 = nlohmann::json::parse(first_message(Dialect::kStratum1));
    EXPECT_EQ(stratum1["method"], "mining.subscribe");
    EXPECT_EQ(stratum1["params"], nlohmann::json::array({"gpuguard-probe/1.0"}));
    const auto eth = nlohmann::json::parse(first_message(Dialect::kEthStratum));
    EXPECT_EQ(eth["method"], "mining.subscribe");
    EXPECT_EQ(eth["params"][1], "EthereumStratum/1.0.0");
    const auto login = nlohmann::json::parse(first_message(Dialect::kCryptoNote));
    EXPECT_EQ(login["method"], "login");
    EXPECT_EQ(login["params"]["login"], dummy_wallet());
    EXPECT_EQ(dummy_wallet().size(), 95u);
    EXPECT_EQ(dummy_wallet().front(), '4');
    EXPECT_STREQ(to_string(Dialect::kCryptoNote), "cryptonote");
}

TEST(PoolProbeVerdict, a_stratum1_subscription_is_a_pool) {
    // braiins.com/stratum-v1/docs: the subscribe result.
    const auto verdict = answered(
        Dialect::kStratum1,
        R"({"id":1,"result":[[["mining.set_difficulty","b4b6693b72a50c7116db18d6497cac52"],)"
        R"(["mining.notify","ae6812eb4cd7735a302a8a9dd95cf71f"]],"08000002",4],"error":null})"
        "\n");
    EXPECT_TRUE(verdict.pool);
    EXPECT_TRUE(verdict.final);
    EXPECT_EQ(verdict.text, "pool: stratum1 mining.subscribe answered with a subscription");
    // The answer to the request names it, before what the pool pushed after it.
    EXPECT_EQ(answered(Dialect::kStratum1,
                       R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4],"error":null})"
                       "\n"
                       R"({"id":null,"method":"mining.set_difficulty","params":[8]})"
                       "\n")
                  .text,
              "pool: stratum1 mining.subscribe answered with a subscription");
}

TEST(PoolProbeVerdict, an_ethereumstratum_subscription_is_a_pool) {
    // EthereumStratum/1.0.0 (NiceHash's proposal): the notification and extranonce.
    const auto verdict = answered(
        Dialect::kEthStratum,
        R"({"id":1,"jsonrpc":"2.0","result":[["mining.notify","ae6812eb4cd7735a302a8a9dd95cf71f",)"
        R"("EthereumStratum/1.0.0"],"080c"],"error":null})");
    EXPECT_TRUE(verdict.pool);
    EXPECT_EQ(verdict.text, "pool: ethstratum mining.subscribe answered with a subscription");
}

TEST(PoolProbeVerdict, a_cryptonote_job_or_a_refused_wallet_is_a_pool) {
    // XMRig's protocol (xmrig/doc/STRATUM.md): the login result with its first job.
    const auto job = answered(
        Dialect::kCryptoNote,
        R"({"id":1,"jsonrpc":"2.0","error":null,"result":{"id":"a7e2","job":{"blob":"0707d5ef",)"
        R"("job_id":"q7PLUPL25UV0z5Ij14IyMk8htXbj","target":"b88d0600","id":"a7e2"},)"
        R"("status":"OK"}})");
    EXPECT_TRUE(job.pool);
    EXPECT_EQ(job.text, "pool: cryptonote login answered with a job");
    // nodejs-pool's answer to a payout address it cannot decode.
    const auto refused = answered(
        Dialect::kCryptoNote,
        R"({"id":1,"jsonrpc":"2.0","error":{"code":-1,"message":"Invalid payment address provided"}})");
    EXPECT_TRUE(refused.pool);
    EXPECT_EQ(refused.text,
              "pool: cryptonote login refused the dummy wallet (Invalid payment address provided)");
}

TEST(PoolProbeVerdict, a_job_or_difficulty_pushed_is_a_pool_whatever_the_reply_to_the_request) {
    const auto verdict =
        answered(Dialect::kStratum1, R"({"id":1,"result":true,"error":null})"
                                     "\n"
                                     R"({"id":null,"method":"mining.set_difficulty","params":[8]})"
                                     "\n");
    EXPECT_TRUE(verdict.pool);
    EXPECT_EQ(verdict.text, "pool: pushed mining.set_difficulty");
}

TEST(PoolProbeVerdict, another_json_rpc_server_is_no_pool_but_the_next_dialect_is_tried) {
    const auto unknown = answered(
        Dialect::kStratum1,
        R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}})");
    EXPECT_FALSE(unknown.pool);
    EXPECT_FALSE(unknown.final);
    EXPECT_EQ(unknown.text, "not a pool for stratum1: JSON-RPC error: Method not found");
    // "Method not found" names no wallet, though the login asked with one.
    const auto login = answered(
        Dialect::kCryptoNote,
        R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}})");
    EXPECT_FALSE(login.pool);
    const auto result = answered(Dialect::kStratum1, R"({"id":1,"result":{"version":"1.2"}})");
    EXPECT_FALSE(result.pool);
    EXPECT_FALSE(result.final);
    EXPECT_EQ(result.text, "not a pool for stratum1: a JSON-RPC result without a pool's form");
}

TEST(PoolProbeVerdict, web_ssh_and_tls_servers_end_the_probe_as_no_pool) {
    const auto http = answered(Dialect::kStratum1, "HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n");
    EXPECT_FALSE(http.pool);
    EXPECT_TRUE(http.final);
    EXPECT_EQ(http.text, "not a pool: HTTP 400");
    EXPECT_EQ(answered(Dialect::kStratum1, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n").text,
              "not a pool: an SSH server");
    EXPECT_EQ(answered(Dialect::kStratum1, std::string("\x15\x03\x03\x00\x02\x02\x46", 7)).text,
              "not a pool: a TLS record on a plain connection");
    const auto other = answered(Dialect::kStratum1, "220 mail.example ESMTP\r\n");
    EXPECT_TRUE(other.final);
    EXPECT_EQ(other.text, "not a pool: an answer in no pool's form");
}

TEST(PoolProbeVerdict, silence_a_close_and_a_failed_connection_say_so) {
    const auto silent = classify(Dialect::kStratum1, Exchange{"", false, true, "", 1500});
    EXPECT_FALSE(silent.pool);
    EXPECT_FALSE(silent.final);
    EXPECT_EQ(silent.text, "no answer in 1500 ms");
    EXPECT_EQ(classify(Dialect::kStratum1, Exchange{"", true, false, "", 1500}).text,
              "no answer: the peer closed the connection");
    const auto refused = classify(
        Dialect::kStratum1, Exchange{"", false, false, "Failed to connect: Connection refused", 0});
    EXPECT_TRUE(refused.final);
    EXPECT_EQ(refused.text, "no connection: Failed to connect: Connection refused");
}

TEST(PoolProbeAddresses, loopback_link_local_multicast_unspecified_and_broadcast_are_refused) {
    const std::pair<const char*, const char*> refused[] = {
        {"127.0.0.1", "loopback"},
        {"127.8.9.10", "loopback"},
        {"::1", "loopback"},
        {"::ffff:127.0.0.1", "loopback"},
        {"169.254.169.254", "link-local"},
        {"fe80::1", "link-local"},
        {"::ffff:169.254.1.1", "link-local"},
        {"224.0.0.251", "multicast"},
        {"239.255.255.250", "multicast"},
        {"ff02::1", "multicast"},
        {"0.0.0.0", "unspecified"},
        {"0.1.2.3", "unspecified"},
        {"::", "unspecified"},
        {"255.255.255.255", "broadcast"},
        {"pool.example.org", "not an IP address"},
        {"", "not an IP address"},
    };
    for (const auto& [address, why] : refused) {
        EXPECT_EQ(refused_address(address), std::optional<std::string>(why)) << address;
    }
    for (const char* address :
         {"203.0.113.7", "10.67.0.2", "192.168.1.20", "2001:db8::7", "::ffff:198.51.100.7",
          "169.253.255.255", "126.255.255.255", "223.255.255.255"}) {
        EXPECT_EQ(refused_address(address), std::nullopt) << address;
    }
}

TEST(PoolProbeAddresses, the_hosts_own_addresses_match_in_any_spelling) {
    const std::vector<std::string> own = {"10.67.0.1", "fd00:67::1", "127.0.0.1"};
    EXPECT_TRUE(own_address("10.67.0.1", own));
    EXPECT_TRUE(own_address("::ffff:10.67.0.1", own));
    EXPECT_TRUE(own_address("fd00:67:0:0:0:0:0:1", own));
    EXPECT_FALSE(own_address("10.67.0.2", own));
    EXPECT_FALSE(own_address("not-an-address", own));
}

TEST(PoolProbeAnswer, kept_answers_are_capped_escaped_and_wallets_shortened) {
    EXPECT_EQ(quoted_answer("HTTP/1.1 400 Bad Request\r\n", 512), "HTTP/1.1 400 Bad Request\\r\\n");
    EXPECT_EQ(quoted_answer(std::string(600, 'a'), 512), std::string(512, 'a') + "…");
    const std::string wallet =
        "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQ"
        "BEP3A";
    const std::string kept = quoted_answer(R"({"result":{"login":")" + wallet + R"("}})", 512);
    EXPECT_EQ(kept.find(wallet), std::string::npos) << kept;
}

}  // namespace
}  // namespace gpuguard::agent::pool_probe
