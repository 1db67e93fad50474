// DNS messages in wire form (RFC 1035) for tests that play a resolver or
// feed answers: the question section they share.
#pragma once

#include <string>

namespace gpuguard::testing {

// The question "`name` IN A": its labels, the root label, QTYPE 1, QCLASS 1.
inline std::string dns_question_a(const std::string& name) {
    std::string out;
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find('.', start);
        if (end == std::string::npos) end = name.size();
        out += static_cast<char>(end - start);
        out += name.substr(start, end - start);
        start = end + 1;
    }
    return out + std::string{0, 0, 1, 0, 1};
}

}  // namespace gpuguard::testing
