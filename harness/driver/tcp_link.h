// TCP links of the control plane without MPI: framed messages over non-blocking sockets,
// listening on a port, connecting to one with retries, and waiting on several links at once,
// every wait against a deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/core/status.h"

namespace zb {

// What a frame carries. A rendezvous is hello (peer) then welcome or refuse (rank 0); a round
// is part (every rank to rank 0) then answer (rank 0 to every rank); abort: rank 0 ended the
// job. Both ends run the same binary, so fields travel in host byte order.
enum class FrameType : uint32_t { hello = 1, welcome, refuse, part, answer, abort };

struct Frame {
  FrameType type = FrameType::part;
  uint64_t round = 0;
  std::string payload;
};

// One connection, non-blocking, closed with the object.
class Link {
 public:
  explicit Link(int fd);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  int fd() const { return fd_; }

  // Takes in what has arrived; *complete once a whole frame is in *frame. A closed connection
  // or a stranger's bytes (no frame header) is an error.
  Status read(Frame* frame, bool* complete);
  // Writes the whole frame, waiting for the socket as long as `deadline` (now_seconds()) allows.
  Status write(const Frame& frame, double deadline);
  // This end's address and the other's ("10.77.0.2").
  std::string local_address() const;
  std::string peer_address() const;

 private:
  int fd_;
  std::string in_;
};

// Listens on `port` of every interface (IPv6 and IPv4 where the host has both).
Status listen_on(int port, int* fd);
// The next connection waiting on `listener`, or null when none is.
std::unique_ptr<Link> accept_from(int listener);
// Connects to host:port, retrying (refused, unreachable, a name that does not resolve yet) until
// `deadline`; the error then names the address and the last reason.
Status connect_to(const std::string& host, int port, double deadline, std::unique_ptr<Link>* out);
// Waits until one of `fds` is readable (or closed) or `until` passes; `ready` holds which are.
Status wait_readable(const std::vector<int>& fds, double until, std::vector<bool>* ready);

}  // namespace zb
