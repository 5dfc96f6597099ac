"""The shared-token check on the learner's port (seedfleet/security.py has the rules).

Every call but the health service's must carry `authorization: Bearer <token>`. One
without it, or with another token, is answered UNAUTHENTICATED by a handler of the
same kind as the method's, before the method runs: no handshake, no env config, no
action reaches the peer.
"""

from __future__ import annotations

import hmac
import logging

import grpc

from seedfleet.security import TOKEN_METADATA_KEY

log = logging.getLogger("seedfleet.learner")

OPEN_SERVICES = ("/grpc.health.v1.Health/",)  # probes carry no token


class TokenCheck(grpc.aio.ServerInterceptor):
    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

    def _authorized(self, metadata) -> bool:
        presented = [value for key, value in metadata or () if key == TOKEN_METADATA_KEY]
        return len(presented) == 1 and hmac.compare_digest(str(presented[0]).encode(), self._expected)

    async def intercept_service(self, continuation, handler_call_details: grpc.HandlerCallDetails):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(OPEN_SERVICES):
            return handler
        if self._authorized(handler_call_details.invocation_metadata):
            return handler
        log.warning("refused a call to %s: missing or wrong token", method)
        return _refusal(handler)


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind that answers UNAUTHENTICATED and reads nothing."""
    async def refuse(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a missing or wrong token (--token-file)")

    async def refuse_streaming(_request, context: grpc.aio.ServicerContext):
        await refuse(_request, context)
        yield  # never reached: makes this an async generator, as streaming handlers are

    kinds = {(False, False): grpc.unary_unary_rpc_method_handler, (True, False): grpc.stream_unary_rpc_method_handler,
             (False, True): grpc.unary_stream_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}
    make = kinds[(handler.request_streaming, handler.response_streaming)]
    return make(refuse_streaming if handler.response_streaming else refuse,
                request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
