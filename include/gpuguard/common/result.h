// Result<T>: a value or an Error, in the shape of std::expected (C++23) so it
// can be swapped for it later. Libraries never throw across their boundary;
// they return Result and name the failed operation in Error::message.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpuguard {

enum class ErrorCode {
    kInvalidArgument,  // caller or configuration gave a bad value
    kNotFound,         // a file, device or kernel object is missing
    kPermission,       // needs root or a capability
    kUnsupported,      // the kernel or hardware lacks the feature
    kParse,            // input could not be parsed (file:line in message)
    kIo,               // read/write/syscall failure
    kInternal,         // a bug or an invariant broken
};

const char* to_string(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::kInternal;
    std::string message;  // one line, says what failed and what to do
    int sys_errno = 0;    // errno of the failed call, 0 if none
};

// Marker for constructing a failed Result, like std::unexpected.
struct Unexpected {
    Error error;
};

[[nodiscard]] inline Unexpected fail(ErrorCode code, std::string message, int sys_errno = 0) {
    return Unexpected{Error{code, std::move(message), sys_errno}};
}

template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(Unexpected failure) : state_(std::in_place_index<1>, std::move(failure.error)) {}

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & {
        assert(ok());
        return std::get<0>(state_);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(state_);
    }
    T&& value() && {
        assert(ok());
        return std::get<0>(std::move(state_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const Error& error() const {
        assert(!ok());
        return std::get<1>(state_);
    }

  private:
    std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Unexpected failure) : error_(std::move(failure.error)), failed_(true) {}

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const Error& error() const {
        assert(failed_);
        return error_;
    }

  private:
    Error error_;
    bool failed_ = false;
};

using Status = Result<void>;

inline const char* to_string(ErrorCode code) {
    switch (code) {
        case ErrorCode::kInvalidArgument:
            return "invalid argument";
        case ErrorCode::kNotFound:
            return "not found";
        case ErrorCode::kPermission:
            return "permission denied";
        case ErrorCode::kUnsupported:
            return "unsupported";
        case ErrorCode::kParse:
            return "parse error";
        case ErrorCode::kIo:
            return "I/O error";
        case ErrorCode::kInternal:
            return "internal error";
    }
    return "unknown error";
}

}  // namespace gpuguard
