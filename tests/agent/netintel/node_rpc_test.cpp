// Solo mining against a node (JSON-RPC over HTTP, the Ergo node's mining API)
// and Grin's stratum are mining sessions; the same nodes' ordinary RPC, and
// other HTTP with a JSON body, are not.
#include <string>

#include <gtest/gtest.h>

#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent::stratum {
namespace {

using Direction = NetPayload::Direction;

// An HTTP POST of `body` to `path`, as a miner's RPC client sends it.
std::string post(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class NodeRpcTest : public ::testing::Test {
  protected:
    Update out(const std::string& bytes) {
        return session_.feed(Direction::kOut, bytes, seq_++, static_cast<uint32_t>(bytes.size()),
                             0);
    }
    Session session_;
    uint32_t seq_ = 0;
};

TEST_F(NodeRpcTest, getblocktemplate_over_http_is_solo_mining) {
    const std::string body =
        R"({"jsonrpc":"1.0","id":1,"method":"getblocktemplate","params":[{"rules":["segwit"]}]})";
    ASSERT_TRUE(may_be_node_rpc(post("/", body)));
    EXPECT_TRUE(out(post("/", body)).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kNodeRpc);
    EXPECT_STREQ(to_string(session_.protocol()), "node_rpc");
    const auto stratum = session_.describe();
    ASSERT_EQ(stratum.messages.size(), 1u);
    EXPECT_EQ(stratum.messages[0], body);  // the body, not the headers
}

TEST_F(NodeRpcTest, monerod_get_block_template_on_a_kept_alive_connection) {
    // A first, ordinary request on the connection, then XMRig's daemon mode.
    EXPECT_FALSE(
        out(post("/json_rpc", R"({"jsonrpc":"2.0","id":"0","method":"get_info"})")).recognised);
    EXPECT_TRUE(out(post("/json_rpc", R"({"jsonrpc":"2.0","id":"0","method":"get_block_template",)"
                                      R"("params":{"wallet_address":"44AFF","reserve_size":60}})"))
                    .recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kNodeRpc);
}

TEST_F(NodeRpcTest, ergo_mining_candidate_and_solution_by_their_path) {
    const std::string get = "GET /mining/candidate HTTP/1.1\r\nHost: 127.0.0.1:9053\r\n\r\n";
    ASSERT_TRUE(may_be_node_rpc(get));
    EXPECT_TRUE(out(get).recognised);
    EXPECT_TRUE(out(post("/mining/solution", R"({"n":"0000000000000000"})")).new_method);
    const auto stratum = session_.describe();
    ASSERT_EQ(stratum.messages.size(), 2u);
    EXPECT_EQ(stratum.messages[0], "GET /mining/candidate HTTP/1.1");
}

TEST_F(NodeRpcTest, grin_getjobtemplate_is_grin_stratum) {
    EXPECT_TRUE(out(R"({"id":"1","jsonrpc":"2.0","method":"getjobtemplate","params":null})"
                    "\n")
                    .recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kGrin);
}

TEST_F(NodeRpcTest, stratum_extensions_alone_are_stratum1) {
    EXPECT_TRUE(out(R"({"id":3,"method":"mining.suggest_target","params":["0000ffff"]})"
                    "\n")
                    .recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kStratum1);
}

TEST_F(NodeRpcTest, a_nodes_ordinary_rpc_and_other_http_are_not_mining) {
    EXPECT_FALSE(
        out(post("/", R"({"jsonrpc":"1.0","id":"m","method":"getblockchaininfo","params":[]})"))
            .recognised);
    EXPECT_FALSE(
        out(post("/", R"({"jsonrpc":"1.0","id":"m","method":"getmininginfo"})")).recognised);
    EXPECT_FALSE(out(post("/api/generate", R"({"model":"llama3","prompt":"getblocktemplate?"})"))
                     .recognised);
    EXPECT_FALSE(out("GET /info HTTP/1.1\r\nHost: 127.0.0.1:9053\r\n\r\n").recognised);
    EXPECT_FALSE(out("GET /mining/rewardAddress HTTP/1.1\r\n\r\n").recognised);
    EXPECT_FALSE(session_.recognised());
    EXPECT_FALSE(may_be_node_rpc("GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"));
    EXPECT_FALSE(may_be_node_rpc("POST /upload HTTP/1.1\r\n\r\nname=x"));
    EXPECT_FALSE(may_be_node_rpc("PUT /x HTTP/1.1\r\n\r\n{}"));
}

}  // namespace
}  // namespace gpuguard::agent::stratum
