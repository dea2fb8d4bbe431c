/*
 * The call that opens a connection to an hqueue server which authenticates its
 * clients (a sidecar, a subscriber's push service, the standalone server's ports).
 *
 * A client holding a token sends hqueueAuthenticate as the FIRST message of a
 * connection, on the transport (framed or buffered) and protocol (binary or compact)
 * it uses for the rest of the connection, then goes on with its calls. The server
 * answers with the name of the principal the token names, or TAuthenticationError
 * and closes the connection. A server that authenticates clients answers any other
 * first message with a TApplicationException whose message starts
 * "authentication required:", and closes the connection: nothing is served before.
 * A server that authenticates no one answers "anonymous".
 *
 * HBase's own Thrift gateways do not know the call: they answer UNKNOWN_METHOD and
 * keep the connection; a client talking to one goes on (it authenticates by its
 * own means, if at all).
 *
 * The token is a secret: servers never log it, echo it or keep it.
 */

namespace py hqueue_auth
namespace java org.hqueue.auth
namespace go hqueue.auth
namespace js HQueueAuth
namespace netstd HQueue.Auth
namespace cpp hqueue.auth
namespace rs hqueue_auth
namespace rb HQueue.Auth
namespace php HQueue.Auth

/* The token was refused: missing, malformed, expired, or not one this
   installation issued. The message says which, never the token. */
exception TAuthenticationError {
  1: string message
}

service HQueueAuth {
  /* Authenticate this connection with `token`; return the principal's name. */
  string hqueueAuthenticate(1: required binary token) throws (1: TAuthenticationError error)
}
