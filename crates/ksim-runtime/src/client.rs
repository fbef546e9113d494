//! Client construction: in process (over the API server's router, no socket,
//! with the `in-process` feature) or from a kubeconfig (a ksim cluster over
//! HTTP, or a real cluster). Every client built from a kubeconfig or a
//! `kube::Config` comes from here, so all of them retry the way client-go
//! does and no other way: only a response the server asked to be retried
//! (429 or 5xx carrying an integer `Retry-After`), after the seconds it
//! asked for, at most [`MAX_RETRIES`] times. A refusal without
//! `Retry-After` (an eviction a PodDisruptionBudget forbids, a 503 from a
//! proxy) comes back to the caller at once. kube's own retry layer, which
//! retries every 429/503/504 up to 15 times with a back-off growing towards
//! minutes, is switched off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{Request, Response, StatusCode, header::RETRY_AFTER};
use kube::client::{Body, ClientBuilder};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::BoxError;
use tower::ServiceBuilder;
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};

use crate::Error;

/// client-go's default ceiling on retries of one request
/// (`rest.Request.maxRetries`).
pub const MAX_RETRIES: u32 = 10;

/// Requests waiting for the retrying layer (as kube's own buffer).
const BUFFER: usize = 1024;

/// A `kube::Client` whose transport is the API server's router itself: the
/// same HTTP semantics as over the wire, without a socket. Must be called
/// inside a tokio runtime.
#[cfg(feature = "in-process")]
pub fn in_process(server: &ksim_apiserver::ApiServer) -> kube::Client {
    kube::Client::new(server.router(), "default")
}

/// A client from a kubeconfig, as kubectl finds it: the file at `path`
/// (else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster
/// service account), in its `context` (else its current context).
pub async fn from_kubeconfig(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, Error> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = match path {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|source| Error::ReadKubeconfig {
                path: path.to_path_buf(),
                source,
            })?;
            if let Some(context) = context
                && !file.contexts.iter().any(|c| c.name == context)
            {
                return Err(Error::NoContext {
                    context: context.to_owned(),
                    path: path.to_path_buf(),
                });
            }
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|source| Error::InvalidKubeconfig {
                    path: path.to_path_buf(),
                    source,
                })?
        }
        None if context.is_some() => {
            kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|source| Error::InvalidKubeconfig {
                    path: PathBuf::from("(default)"),
                    source,
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(|source| Error::NoKubeconfig(Box::new(source)))?,
    };
    from_config(config)
}

/// A client for `config` with client-go's retry rule (see the module's
/// documentation). Must be called inside a tokio runtime.
pub fn from_config(mut config: kube::Config) -> Result<kube::Client, Error> {
    config.default_retry = false;
    let builder = ClientBuilder::try_from(config).map_err(Error::Client)?;
    let stack = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryAfter::default()))
        .layer(BufferLayer::new(BUFFER));
    Ok(builder.with_layer(&stack).build())
}

/// client-go's rule for retrying one request (`checkWait` in its rest
/// client): a 429 or any 5xx whose `Retry-After` is a whole number of
/// seconds is sent again after that many seconds, at most [`MAX_RETRIES`]
/// times; every other answer is final.
#[derive(Debug, Clone, Default)]
pub struct RetryAfter {
    retries: u32,
}

impl RetryAfter {
    /// How long the server asked to wait before `response` may be retried,
    /// if it did.
    pub fn wait<B>(response: &Response<B>) -> Option<Duration> {
        let status = response.status();
        if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
            return None;
        }
        let seconds: i64 = response
            .headers()
            .get(RETRY_AFTER)?
            .to_str()
            .ok()?
            .parse()
            .ok()?;
        Some(Duration::from_secs(seconds.max(0).unsigned_abs()))
    }
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let wait = RetryAfter::wait(result.as_ref().ok()?)?;
        if self.retries >= MAX_RETRIES {
            return None;
        }
        self.retries += 1;
        tracing::debug!(
            url = %request.uri(),
            attempt = self.retries,
            retry_after = ?wait,
            "retrying as the server asked"
        );
        Some(tokio::time::sleep(wait)) // wall-clock: a server's Retry-After
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        let body = request.body().try_clone()?;
        let mut clone = Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone())
            .version(request.version())
            .body(body)
            .ok()?;
        *clone.headers_mut() = request.headers().clone();
        *clone.extensions_mut() = request.extensions().clone();
        Some(clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> Response<()> {
        let mut builder = Response::builder().status(status);
        if let Some(value) = retry_after {
            builder = builder.header(RETRY_AFTER, value);
        }
        builder.body(()).expect("valid response")
    }

    #[test]
    fn only_a_429_or_5xx_with_whole_seconds_is_retried() {
        assert_eq!(RetryAfter::wait(&response(429, None)), None);
        assert_eq!(RetryAfter::wait(&response(503, None)), None);
        assert_eq!(RetryAfter::wait(&response(504, None)), None);
        assert_eq!(
            RetryAfter::wait(&response(429, Some("10"))),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            RetryAfter::wait(&response(500, Some("1"))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            RetryAfter::wait(&response(503, Some("-3"))),
            Some(Duration::ZERO)
        );
        // An HTTP date is not a number of seconds: client-go does not wait on it.
        assert_eq!(
            RetryAfter::wait(&response(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"))),
            None
        );
        assert_eq!(RetryAfter::wait(&response(409, Some("1"))), None);
        assert_eq!(RetryAfter::wait(&response(200, Some("1"))), None);
    }
}
