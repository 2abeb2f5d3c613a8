// TCP links: frames over non-blocking sockets. send() with MSG_NOSIGNAL, not write(): a closed
// peer is an error rather than SIGPIPE, and the socket write counter (wchar, which counts
// write() and writev()) keeps measuring only the backends' traffic.
#include "harness/driver/tcp_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "harness/core/clock.h"

namespace zb {
namespace {

constexpr uint32_t kMagic = 0x7a62637eu;  // "~czb": a frame of ours, not a stranger's bytes
struct Header {
  uint32_t magic, type;
  uint64_t round, length;
};

std::string errno_text() { return std::strerror(errno); }

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // rounds are small and in lock step
}

std::string address_text(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
  } else if (a.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &a6.sin6_addr, buf, sizeof buf);
    // An IPv4 peer on a dual-stack socket: its IPv4 address.
    if (IN6_IS_ADDR_V4MAPPED(&a6.sin6_addr)) inet_ntop(AF_INET, &a6.sin6_addr.s6_addr[12], buf, sizeof buf);
  }
  return buf;
}

// One attempt: connected, or the reason it was not (within `until`).
int try_connect(const addrinfo* ai, double until, std::string* why) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return *why = "socket: " + errno_text(), -1;
  set_nonblocking(fd);
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int ms = int(std::max(0.0, std::min(1.0, until - now_seconds())) * 1000);
    if (poll(&p, 1, ms) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) return fd;
      errno = err;
    } else {
      errno = ETIMEDOUT;
    }
  }
  *why = errno_text();
  close(fd);
  return -1;
}

}  // namespace

Link::Link(int fd) : fd_(fd) { set_nonblocking(fd_); }

Link::~Link() {
  if (fd_ >= 0) close(fd_);
}

Status Link::read(Frame* frame, bool* complete) {
  *complete = false;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      in_.append(buf, size_t(n));
      if (size_t(n) < sizeof buf) break;
      continue;
    }
    if (n == 0) return Status::error("the connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return Status::error("the connection failed: " + errno_text());
  }
  if (in_.size() < sizeof(Header)) return Status::ok();
  Header h;
  std::memcpy(&h, in_.data(), sizeof h);
  if (h.magic != kMagic) return Status::error("the other end is no zerobench control plane");
  if (in_.size() < sizeof h + h.length) return Status::ok();
  frame->type = FrameType(h.type);
  frame->round = h.round;
  frame->payload = in_.substr(sizeof h, h.length);
  in_.erase(0, sizeof h + h.length);
  *complete = true;
  return Status::ok();
}

Status Link::write(const Frame& frame, double deadline) {
  Header h{kMagic, uint32_t(frame.type), frame.round, frame.payload.size()};
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes += frame.payload;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return Status::error("the connection failed: " + errno_text());
    const double left = deadline - now_seconds();
    if (left <= 0) return Status::error("the other end took nothing for too long");
    pollfd p{fd_, POLLOUT, 0};
    poll(&p, 1, int(std::min(left, 0.1) * 1000) + 1);
  }
  return Status::ok();
}

std::string Link::local_address() const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  return getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? address_text(a) : "";
}

std::string Link::peer_address() const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  return getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? address_text(a) : "?";
}

Status listen_on(int port, int* out) {
  // Dual stack first (IPv6 and IPv4 on one socket), IPv4 alone where IPv6 is off.
  for (int family : {AF_INET6, AF_INET}) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int one = 1, zero = 0;
    // A port the previous job on this address closed moments ago is free again at once.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage a{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto& a6 = reinterpret_cast<sockaddr_in6&>(a);
      a6.sin6_family = AF_INET6, a6.sin6_addr = in6addr_any, a6.sin6_port = htons(uint16_t(port));
      len = sizeof a6;
    } else {
      auto& a4 = reinterpret_cast<sockaddr_in&>(a);
      a4.sin_family = AF_INET, a4.sin_addr.s_addr = htonl(INADDR_ANY), a4.sin_port = htons(uint16_t(port));
      len = sizeof a4;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(fd, 1024) == 0) {
      set_nonblocking(fd);
      *out = fd;
      return Status::ok();
    }
    const int err = errno;
    close(fd);
    if (err == EADDRINUSE)
      return Status::error("cannot listen on port " + std::to_string(port) + ": " + std::strerror(err) +
                           " (another job, or another program, holds it)");
  }
  return Status::error("cannot listen on port " + std::to_string(port) + ": " + errno_text());
}

std::unique_ptr<Link> accept_from(int listener) {
  int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  return fd < 0 ? nullptr : std::make_unique<Link>(fd);
}

Status connect_to(const std::string& host, int port, double deadline, std::unique_ptr<Link>* out) {
  std::string why;
  for (;;) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      why = "cannot resolve '" + host + "': " + gai_strerror(rc);
    } else {
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        int fd = try_connect(ai, deadline, &why);
        if (fd >= 0) {
          freeaddrinfo(res);
          *out = std::make_unique<Link>(fd);
          return Status::ok();
        }
      }
      freeaddrinfo(res);
    }
    // Rank 0 may not listen yet (or a name may not resolve yet, as a Kubernetes service's
    // does not before its pod runs): again, until the deadline.
    if (now_seconds() + 0.1 > deadline) return Status::error(why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status wait_readable(const std::vector<int>& fds, double until, std::vector<bool>* ready) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  ready->assign(fds.size(), false);
  const double left = until - now_seconds();
  if (left <= 0) return Status::ok();
  // At most 100 ms at a time, so the caller looks at its clock and its other links.
  int n = poll(p.data(), p.size(), int(std::min(left, 0.1) * 1000) + 1);
  if (n < 0 && errno != EINTR) return Status::error("poll: " + errno_text());
  for (size_t i = 0; i < p.size(); ++i) (*ready)[i] = n > 0 && p[i].revents != 0;
  return Status::ok();
}

}  // namespace zb
