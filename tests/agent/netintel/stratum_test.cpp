// Stratum recognition per dialect, share accounting and the hash-rate
// estimate, and what must not be taken for mining.
#include "gpuguard/netintel/stratum.h"

#include <gtest/gtest.h>

namespace gpuguard::agent::stratum {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;
using Direction = NetPayload::Direction;

class SessionTest : public ::testing::Test {
  protected:
    Update out(const std::string& line, uint64_t ts = 0) {
        return session_.feed(Direction::kOut, line + "\n", out_seq_++,
                             static_cast<uint32_t>(line.size() + 1), ts);
    }
    Update in(const std::string& line, uint64_t ts = 0) {
        return session_.feed(Direction::kIn, line + "\n", in_seq_++,
                             static_cast<uint32_t>(line.size() + 1), ts);
    }
    Session session_;
    uint32_t out_seq_ = 0;
    uint32_t in_seq_ = 0;
};

TEST_F(SessionTest, stratum1_is_recognised_by_its_first_request_whatever_the_key_order) {
    const auto update =
        out(R"({"params": ["cgminer/4.10.0"], "id": 1, "method": "mining.subscribe"})");
    EXPECT_TRUE(update.recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kStratum1);
    const auto stratum = session_.describe();
    EXPECT_EQ(stratum.agent, "cgminer/4.10.0");
    ASSERT_EQ(stratum.messages.size(), 1u);
    EXPECT_NE(stratum.messages[0].find("mining.subscribe"), std::string::npos);
}

TEST_F(SessionTest, stratum1_hash_rate_is_share_difficulty_times_2_pow_32_over_time) {
    out(R"({"id":1,"method":"mining.subscribe","params":[]})");
    out(R"({"id":2,"method":"mining.authorize","params":["1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2.rig1","x"]})");
    in(R"({"id":null,"method":"mining.set_difficulty","params":[16]})", 98 * kSecond);
    in(R"({"id":null,"method":"mining.notify","params":["bf","4d16"]})", 98 * kSecond);
    // 11 shares of 16 * 2^32 hashes each, one every 2 s from 100 s: over the
    // session (22 s since the first job), not the gaps between shares.
    for (int i = 0; i <= 10; ++i) {
        const std::string id = std::to_string(10 + i);
        out(R"({"params":["w","bf","00000001","504e86ed","b2957c02"],"id":)" + id +
                R"(,"method":"mining.submit"})",
            (100 + 2 * i) * kSecond);
        in(R"({"id":)" + id + R"(,"result":)" + (i == 3 ? "false" : "true") + R"(,"error":null})");
    }
    const auto stratum = session_.describe();
    EXPECT_EQ(stratum.protocol, "stratum1");
    EXPECT_EQ(stratum.login, "1BvBMSEY\u2026.rig1");
    EXPECT_EQ(stratum.shares_submitted, 11u);
    EXPECT_EQ(stratum.shares_accepted, 10u);
    EXPECT_EQ(stratum.shares_rejected, 1u);
    EXPECT_EQ(stratum.difficulty_updates, 1u);
    ASSERT_TRUE(stratum.hash_rate);
    EXPECT_DOUBLE_EQ(*stratum.hash_rate, 11 * 16 * 4294967296.0 / 22);
    ASSERT_TRUE(stratum.hash_rate_low && stratum.hash_rate_high);
    EXPECT_LT(*stratum.hash_rate_low, *stratum.hash_rate);
    EXPECT_GT(*stratum.hash_rate_high, *stratum.hash_rate);
}

TEST_F(SessionTest, ethereum_stratum_uses_the_target_for_share_hashes) {
    out(R"({"id":1,"method":"mining.subscribe","params":["ethminer/0.19","EthereumStratum/1.0.0"]})");
    EXPECT_EQ(session_.protocol(), Protocol::kEthereumStratum);
    // Target 2^240: 2^16 hashes per share.
    in(R"({"id":null,"method":"mining.set_target","params":["0001000000000000000000000000000000000000000000000000000000000000"]})",
       9 * kSecond);
    out(R"({"id":5,"method":"mining.submit","params":["w","j","0x1"]})", 10 * kSecond);
    out(R"({"id":6,"method":"mining.submit","params":["w","j","0x2"]})", 11 * kSecond);
    ASSERT_TRUE(session_.hash_rate());
    EXPECT_NEAR(*session_.hash_rate(), 2 * 65536.0 / 2, 1e-6);  // two shares in 2 s
}

TEST_F(SessionTest, mining_hello_is_ethereum_stratum_2) {
    EXPECT_TRUE(
        out(R"({"id":0,"method":"mining.hello","params":{"agent":"ethminer-0.19","host":"p","port":"4444","proto":"EthereumStratum/2.0.0"}})")
            .recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kEthereumStratum);
    EXPECT_EQ(session_.describe().agent, "ethminer-0.19");
}

TEST_F(SessionTest, ethproxy_login_work_and_reported_hashrate) {
    out(R"({"worker":"rig7","jsonrpc":"2.0","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a"],"id":1,"method":"eth_submitLogin"})");
    EXPECT_EQ(session_.protocol(), Protocol::kEthProxy);
    out(R"({"id":2,"method":"eth_getWork","params":[]})");
    in(R"({"id":2,"jsonrpc":"2.0","result":["0xabc","0xdef","0x0000000100000000000000000000000000000000000000000000000000000000"]})",
       1 * kSecond);
    out(R"({"id":3,"method":"eth_submitHashrate","params":["0x1dcd6500","0xabc"]})");
    out(R"({"id":4,"method":"eth_submitWork","params":["0x1","0x2","0x3"]})", 1 * kSecond);
    out(R"({"id":5,"method":"eth_submitWork","params":["0x1","0x2","0x3"]})", 3 * kSecond);
    const auto stratum = session_.describe();
    EXPECT_EQ(stratum.login, "0xb85150\u2026.rig7");
    ASSERT_TRUE(stratum.reported_hash_rate);
    EXPECT_DOUBLE_EQ(*stratum.reported_hash_rate, 500'000'000.0);
    ASSERT_TRUE(stratum.hash_rate);
    EXPECT_NEAR(*stratum.hash_rate, 2 * 4294967296.0 / 2, 1);  // 2^256 / 2^224 per share, 2 s
}

TEST_F(SessionTest, cryptonote_login_job_target_and_submits) {
    EXPECT_TRUE(
        out(R"j({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":"44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQBEP3A","pass":"x","agent":"XMRig/6.21.0 (Linux x86_64)"}})j")
            .recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kCryptoNote);
    // Target b88d0600 (LE) = 0x00068db8 -> difficulty floor(0xffffffff / 0x68db8) = 10000.
    in(R"({"id":1,"jsonrpc":"2.0","error":null,"result":{"id":"1","job":{"blob":"0707","job_id":"4","target":"b88d0600","seed_hash":"ab"},"status":"OK"}})",
       9 * kSecond);
    for (int i = 0; i < 5; ++i) {
        const std::string id = std::to_string(2 + i);
        out(R"({"id":)" + id +
                R"(,"jsonrpc":"2.0","method":"submit","params":{"id":"1","job_id":"4","nonce":"0000","result":"ff"}})",
            (10 + i) * kSecond);
        in(R"({"id":)" + id + R"(,"jsonrpc":"2.0","error":null,"result":{"status":"OK"}})");
    }
    const auto stratum = session_.describe();
    EXPECT_EQ(stratum.agent, "XMRig/6.21.0 (Linux x86_64)");
    EXPECT_EQ(stratum.login, "44AFFq5k\u2026");
    EXPECT_EQ(stratum.shares_accepted, 5u);
    EXPECT_DOUBLE_EQ(stratum.share_hashes, 10000.0);
    ASSERT_TRUE(stratum.hash_rate);
    EXPECT_DOUBLE_EQ(*stratum.hash_rate, 5 * 10000.0 / 5);  // five shares in the 5 s since the job
}

TEST_F(SessionTest, a_job_line_cut_at_the_capture_limit_still_sets_the_difficulty) {
    out(R"({"id":1,"method":"login","params":{"login":"4A","pass":"x"}})");
    const std::string job =
        R"({"jsonrpc":"2.0","method":"job","params":{"target":"b88d0600","blob":")" +
        std::string(600, '0');
    session_.feed(Direction::kIn, std::string_view(job).substr(0, 512), 0, 700, 0);
    EXPECT_DOUBLE_EQ(session_.describe().share_hashes, 10000.0);
}

TEST_F(SessionTest, stratum2_is_recognised_by_its_noise_handshake_sizes) {
    const std::string client_act(64, '\x11');
    const std::string server_act(170, '\x22');
    EXPECT_FALSE(session_.feed(Direction::kOut, client_act, 0, 64, 0).recognised);
    EXPECT_FALSE(session_.feed(Direction::kIn, server_act, 0, 170, 1).recognised);
    // Long-lived: the connection goes on after the handshake (SetupConnection).
    EXPECT_TRUE(session_.feed(Direction::kOut, std::string(90, '\x33'), 1, 90, 2).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kStratum2);
    EXPECT_EQ(session_.describe().messages,
              std::vector<std::string>{"noise_handshake client_act=64 server_act=170"});
}

TEST_F(SessionTest, a_handshake_that_ends_the_connection_is_not_stratum2) {
    session_.feed(Direction::kOut, std::string(64, '\x11'), 0, 64, 0);
    session_.feed(Direction::kIn, std::string(170, '\x22'), 0, 170, 1);
    EXPECT_FALSE(session_.recognised());
}

TEST_F(SessionTest, ethereum_stratum_2_target_and_32_byte_hashrate) {
    out(R"({"id":0,"method":"mining.hello","params":{"agent":"ethminer-0.19","host":"p","port":"4444","proto":"EthereumStratum/2.0.0"}})");
    // Leading zeros left out: 2^224, 2^32 hashes per share.
    in(R"({"jsonrpc":"2.0","method":"mining.set","params":{"epoch":"dc","target":"0x100000000000000000000000000000000000000000000000000000000","algo":"ethash"}})");
    EXPECT_DOUBLE_EQ(session_.describe().share_hashes, 4294967296.0);
    out(R"({"id":16,"jsonrpc":"2.0","method":"mining.hashrate","params":["0x0000000000000000000000000000000000000000000000000000000000500000","abgx75"]})");
    ASSERT_TRUE(session_.describe().reported_hash_rate);
    EXPECT_DOUBLE_EQ(*session_.describe().reported_hash_rate, 0x500000);
}

TEST_F(SessionTest, other_binary_handshakes_are_not_stratum2) {
    session_.feed(Direction::kOut, std::string(64, '\x16'), 0, 64, 0);
    session_.feed(Direction::kIn, std::string(171, '\x16'), 0, 171, 1);
    EXPECT_FALSE(session_.recognised());
}

TEST_F(SessionTest, ordinary_json_rpc_is_not_mining) {
    out(R"({"jsonrpc":"2.0","method":"eth_getBalance","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a","latest"],"id":1})");
    in(R"({"jsonrpc":"2.0","id":1,"result":"0x0234c8a3397aab58"})");
    out(R"({"jsonrpc":"2.0","method":"eth_getWork","params":[],"id":2})");  // a node API too
    out(R"({"method":"login","params":{"username":"bob","password":"x"}})");
    out(R"({"method":"submit","params":{"form":1}})");
    in(R"({"method":"job","params":{"name":"backup"}})");
    out(R"({"method":"mining.subscriber"})");
    EXPECT_FALSE(session_.recognised());
}

// First messages cut at the 512-byte capture limit, no pool answer: each
// protocol is recognised from the bytes before the cut.
class CutLineTest : public ::testing::Test {
  protected:
    static constexpr size_t kCapture = 512;
    // `line` as the sensor captures it: its first 512 bytes of a longer message.
    Update cut(const std::string& line) {
        EXPECT_GT(line.size(), kCapture) << line;
        return session_.feed(Direction::kOut, std::string_view(line).substr(0, kCapture), 0,
                             static_cast<uint32_t>(line.size() + 1), 0);
    }
    Session session_;
};

// A 95-character Monero address (XMRig's donation address, from its README).
const std::string kMoneroWallet =
    "48edfHu7V9Z84YzzMa6fUueoELZ9ZRXq9VetWzYGzKt52XU5xvqgzYnDK9URnRoJMk1j8nLwEVsaSWJ4fhdUyZijBGUico"
    "D";
const std::string kXmrigAlgos =
    R"(["cn/1","cn/2","cn/r","cn/fast","cn/half","cn/xao","cn/rto","cn/rwz","cn/zls","cn/double",)"
    R"("cn/ccx","cn-lite/1","cn-heavy/0","cn-heavy/tube","cn-heavy/xhv","cn-pico","cn-pico/tlo",)"
    R"("cn/upx2","rx/0","rx/wow","rx/arq","rx/graft","rx/sfx","rx/keva","argon2/chukwa",)"
    R"("argon2/chukwav2","argon2/ninja","ghostrider"])";

TEST_F(CutLineTest, an_xmrig_login_with_a_monero_wallet_is_recognised_before_the_cut) {
    const std::string login = R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":")" +
                              kMoneroWallet +
                              R"(","pass":"x","agent":"XMRig/6.21.0 (Linux x86_64) libuv/1.44.2 )"
                              R"(gcc/11.4.0","rigid":"","algo":)" +
                              kXmrigAlgos + "}}";
    EXPECT_TRUE(cut(login).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kCryptoNote);
    const auto stratum = session_.describe();
    EXPECT_EQ(stratum.login, "48edfHu7\u2026");
    EXPECT_EQ(stratum.agent, "XMRig/6.21.0 (Linux x86_64) libuv/1.44.2 gcc/11.4.0");
    ASSERT_EQ(stratum.methods, std::vector<std::string>{"login"});
}

TEST_F(CutLineTest, a_login_cut_inside_the_wallet_is_recognised_by_its_length) {
    // A pool user "WALLET.worker" after a long password: the cut falls in the
    // wallet, 80 of its 95 characters captured.
    const std::string login = R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"pass":")" +
                              std::string(360, 'p') + R"(","login":")" + kMoneroWallet +
                              R"(.rig01"}})";
    EXPECT_TRUE(cut(login).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kCryptoNote);
}

TEST_F(CutLineTest, stratum_subscribe_and_authorize_are_recognised_before_the_cut) {
    const std::string subscribe = R"({"id":1,"method":"mining.subscribe","params":[")" +
                                  std::string(520, 'a') + R"(",null]})";
    EXPECT_TRUE(cut(subscribe).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kStratum1);
    Session authorize_only;
    const std::string authorize = R"({"id":2,"method":"mining.authorize","params":["RVN:)" +
                                  std::string(34, 'R') + "." + std::string(500, 'w') + R"(","x"]})";
    EXPECT_TRUE(authorize_only
                    .feed(Direction::kOut, std::string_view(authorize).substr(0, kCapture), 0,
                          static_cast<uint32_t>(authorize.size()), 0)
                    .recognised);
}

TEST_F(CutLineTest, ethproxy_login_is_recognised_before_the_cut) {
    const std::string login = R"({"id":1,"jsonrpc":"2.0","method":"eth_submitLogin","worker":")" +
                              std::string(480, 'w') +
                              R"(","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a","x"]})";
    EXPECT_TRUE(cut(login).recognised);
    EXPECT_EQ(session_.protocol(), Protocol::kEthProxy);
}

TEST_F(CutLineTest, ethereum_stratum_hello_is_recognised_before_the_cut) {
    const std::string hello =
        R"({"id":0,"method":"mining.hello","params":{"agent":")" + std::string(500, 'g') +
        R"(","host":"eu1.ethermine.org","port":"4444","proto":"EthereumStratum/2.0.0"}})";
    EXPECT_TRUE(cut(hello).recognised);
}

TEST_F(CutLineTest, cut_json_rpc_that_is_not_mining_is_not_recognised) {
    // An eth_call with a long data argument; a web API's login; a login with a short user.
    EXPECT_FALSE(cut(R"({"jsonrpc":"2.0","id":7,"method":"eth_call","params":[{"to":"0x7a25",)"
                     R"("data":"0x)" +
                     std::string(600, 'd') + R"("},"latest"]})")
                     .recognised);
    EXPECT_FALSE(
        cut(R"({"login":"alice","password":")" + std::string(600, 'x') + "\"}").recognised);
    EXPECT_FALSE(cut(R"({"method":"login","params":{"login":"alice","token":")" +
                     std::string(600, 't') + "\"}}")
                     .recognised);
    EXPECT_FALSE(session_.recognised());
}

TEST(StratumMath, difficulty_and_target_conversions) {
    EXPECT_DOUBLE_EQ(*hashes_from_difficulty(1), 4294967296.0);
    EXPECT_FALSE(hashes_from_difficulty(0));
    EXPECT_FALSE(hashes_from_difficulty(-1));
    EXPECT_NEAR(*hashes_from_target256(
                    "0x00000000ffff0000000000000000000000000000000000000000000000000000"),
                4295032833.0, 1);                                    // bitcoin difficulty 1
    EXPECT_NEAR(*hashes_from_target256("0000ffff"), 65537.0, 0.01);  // the most significant digits
    EXPECT_FALSE(hashes_from_target256("zz"));
    EXPECT_FALSE(hashes_from_target256("0"));
    EXPECT_DOUBLE_EQ(*hashes_from_cryptonote_target("b88d0600"), 10000.0);
    EXPECT_DOUBLE_EQ(*hashes_from_cryptonote_target("ffffffff"), 1.0);
    EXPECT_DOUBLE_EQ(*hashes_from_cryptonote_target("ffffffffffffff00"), 256.0);
    EXPECT_FALSE(hashes_from_cryptonote_target("b88d06"));
}

TEST(StratumMath, a_hash_rate_is_described_with_its_interval_in_one_unit) {
    EXPECT_EQ(describe_hash_rate(1.2e6, 0.9e6, 1.6e6), "1.2 MH/s (0.9-1.6)");
    // The interval in the estimate's unit, even where an end would have another.
    EXPECT_EQ(describe_hash_rate(343.6e9, 980e6, 1.2e12), "343.6 GH/s (1.0-1200.0)");
    EXPECT_EQ(describe_hash_rate(2500, 12, 9000), "2.5 kH/s (0.012-9.000)");
    // No interval (an older agent, a session of one share): the rate alone.
    EXPECT_EQ(describe_hash_rate(999), "999.0 H/s");
    EXPECT_EQ(describe_hash_rate(4.3e9, std::nullopt, 5e9), "4.3 GH/s");
    EXPECT_EQ(describe_hash_rate(7e18), "7000.0 PH/s");
}

TEST(StratumRedact, wallets_are_cut_worker_names_kept) {
    EXPECT_EQ(redact_login("rig1"), "rig1");
    EXPECT_EQ(redact_login("alice.worker"), "alice.worker");
    EXPECT_EQ(redact_login("44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3Xjrp+1000"),
              "44AFFq5k\u2026+1000");
}

TEST(StratumRedact, payload_lines_keep_their_shape_and_lose_the_wallets) {
    const std::string xmr = "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3Xjrp";
    const std::string eth = "0xb85150eb365e7df0941f0cf08235f987ba91506a";
    EXPECT_EQ(
        redact_wallets(R"({"id":2,"method":"mining.authorize","params":[")" + eth +
                       R"(.rig2","x"]})"),
        "{\"id\":2,\"method\":\"mining.authorize\",\"params\":[\"0xb85150\u2026.rig2\",\"x\"]}");
    const std::string login = redact_wallets(R"({"method":"login","params":{"login":")" + xmr +
                                             R"(","pass":"x","agent":"XMRig/6.21.0 Linux x86_64"
}
})");
    EXPECT_EQ(login.find(xmr), std::string::npos);
    EXPECT_NE(login.find("\"44AFFq5k\u2026\""), std::string::npos);
    EXPECT_NE(login.find("\"XMRig/6.21.0 Linux x86_64\""), std::string::npos);
    // A line cut inside the wallet (512-byte capture) is cut too; escapes are skipped.
    EXPECT_EQ(redact_wallets(R"({"params":[")" + xmr.substr(0, 30)),
              "{\"params\":[\"44AFFq5k\u2026");
    EXPECT_EQ(redact_wallets(R"({"a":"x\"y","b":"short"})"), R"({"a":"x\"y","b":"short"})");
    EXPECT_EQ(redact_wallets(""), "");
}

}  // namespace
}  // namespace gpuguard::agent::stratum
