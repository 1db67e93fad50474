// printable(): what a process chose (its name, argv, paths, traffic) cannot
// drive a terminal or forge a log line once printed; and the agent's log
// format applies it to every message.
#include "gpuguard/common/printable.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"

namespace {

using gpuguard::printable;

TEST(Printable, printable_text_and_utf8_pass_unchanged) {
    EXPECT_EQ(printable("xmrig --cuda -o stratum+tcp://pool:3333"),
              "xmrig --cuda -o stratum+tcp://pool:3333");
    EXPECT_EQ(printable("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
              "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(printable(""), "");
}

TEST(Printable, controls_are_escaped) {
    EXPECT_EQ(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
    EXPECT_EQ(printable("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
    EXPECT_EQ(printable(std::string("nul\0byte", 8)), "nul\\x00byte");
    EXPECT_EQ(printable("del\x7f"), "del\\x7f");
}

TEST(Printable, c1_controls_and_bidi_overrides_are_escaped) {
    EXPECT_EQ(printable("\xc2\x9b"
                        "2J"),
              "\\u009b2J");  // one-byte CSI
    EXPECT_EQ(printable("ab\xe2\x80\xae"
                        "cd"),
              "ab\\u202ecd");                                              // right-to-left override
    EXPECT_EQ(printable("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069");  // isolates
    EXPECT_EQ(printable("l1\xe2\x80\xa8l2"), "l1\\u2028l2");               // line separator
}

TEST(Printable, bytes_that_are_not_utf8_are_escaped) {
    EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
    EXPECT_EQ(printable("\xc3"), "\\xc3");                             // truncated sequence
    EXPECT_EQ(printable("\x80x"), "\\x80x");                           // stray continuation byte
    EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
    EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(Printable, output_has_no_control_byte_for_any_input_byte) {
    std::string every;
    for (int c = 0; c < 256; ++c) every += static_cast<char>(c);
    for (const std::string& text : {every, every + every.substr(0x80)}) {
        for (unsigned char c : printable(text)) {
            EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "byte " << static_cast<int>(c);
        }
    }
}

// A message quoting a hostile name is one line on stderr, its escape
// sequences written out.
TEST(Printable, log_lines_escape_what_they_quote) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const int saved = dup(STDERR_FILENO);
    ASSERT_GE(saved, 0);
    std::fflush(stderr);
    dup2(pipe_fds[1], STDERR_FILENO);
    auto log = gpuguard::logger("printable-test");
    log->warn("killed '{}'", "x\n2026-11-24T00:00:00.000 critical [agent] forged\x1b[31m");
    log->flush();
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(pipe_fds[1]);
    std::string written;
    char buffer[4096];
    for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) written.append(buffer, n);
    close(pipe_fds[0]);
    EXPECT_EQ(std::count(written.begin(), written.end(), '\n'), 1) << written;
    EXPECT_EQ(written.find('\x1b'), std::string::npos) << written;
    EXPECT_NE(written.find("killed 'x\\n2026-11-24T00:00:00.000 critical [agent] forged\\x1b[31m'"),
              std::string::npos)
        << written;
}

}  // namespace
