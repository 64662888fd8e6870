// The client-side security flags shared by stoker-bench, stoker-diagnose and
// stoker-health (--tls-ca, --tls-cert, --tls-key, --tls-server-name,
// --auth-token-file). Linked only into those mains; read after flag parsing.
#ifndef STOKER_CLIENT_SECURITY_FLAGS_H_
#define STOKER_CLIENT_SECURITY_FLAGS_H_

#include "client/channel_security.h"

namespace stoker {

ChannelSecurity SecurityFromFlags();

}  // namespace stoker

#endif  // STOKER_CLIENT_SECURITY_FLAGS_H_
