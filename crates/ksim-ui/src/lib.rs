//! ksim-ui: the web view of a cluster. It owns the page's assets (plain
//! HTML, CSS and JavaScript modules, embedded in the binary at build time:
//! no JavaScript toolchain, no build step) and [`router`], the axum
//! `Router` a cluster merges into its API server's listener to serve them
//! at `/ui/`.
//!
//! The page reads only the API of the same origin (lists, then watches read
//! as fetch streams): the Kubernetes API, and for its timeline ksim's
//! `/ksim/v1alpha1/timeline` (the Events and the API server's eviction
//! records in one watch); this crate serves files and nothing else, so it
//! depends on no other ksim crate.

use axum::Router;
use axum::extract::Path;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};

/// Where the page is served.
pub const PREFIX: &str = "/ui/";

/// One embedded file: its name under `/ui/`, content type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../assets/", $name)),
        }
    };
}

/// Every file of the page. `index.html` is served at `/ui/`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("k8s.js", "text/javascript; charset=utf-8"),
    asset!("model.js", "text/javascript; charset=utf-8"),
    asset!("views.js", "text/javascript; charset=utf-8"),
];

/// The names of the embedded files (for tests and docs).
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

/// The router serving the page: `/ui` redirects to `/ui/`, `/ui/` is the
/// page, `/ui/<file>` its assets; any other name under `/ui/` is a 404.
/// It has no fallback, so it merges into a router that has one.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent(PREFIX) }))
        .route("/ui/", get(|| async { respond("index.html") }))
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>| async move { respond(&file) }),
        )
}

fn respond(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // The assets change with the binary: always revalidate.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(path: &str) -> (StatusCode, Option<String>, String) {
        let response = router::<()>()
            .oneshot(
                Request::get(path)
                    .body(Body::empty())
                    .expect("a valid request"),
            )
            .await
            .expect("the router answers");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn the_page_and_its_modules_are_served() {
        let (status, content_type, body) = get("/ui/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some("text/html; charset=utf-8"));
        assert!(
            body.contains("<script type=\"module\" src=\"app.js\">"),
            "{body}"
        );
        for name in asset_names() {
            let (status, content_type, body) = get(&format!("/ui/{name}")).await;
            assert_eq!(status, StatusCode::OK, "{name}");
            assert!(!body.is_empty(), "{name}");
            if name.ends_with(".js") {
                assert_eq!(
                    content_type.as_deref(),
                    Some("text/javascript; charset=utf-8")
                );
            }
        }
    }

    #[tokio::test]
    async fn unknown_files_are_not_found_and_ui_redirects() {
        assert_eq!(get("/ui/nope.js").await.0, StatusCode::NOT_FOUND);
        assert_eq!(get("/ui/../Cargo.toml").await.0, StatusCode::NOT_FOUND);
        assert_eq!(get("/ui").await.0, StatusCode::PERMANENT_REDIRECT);
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        let names: Vec<&str> = asset_names().collect();
        for asset in ASSETS {
            let text = String::from_utf8_lossy(asset.body);
            for (at, _) in text.match_indices("from './") {
                let file = &text[at + 8..];
                let file = &file[..file.find('\'').unwrap_or(file.len())];
                assert!(names.contains(&file), "{} imports {file}", asset.name);
            }
        }
    }
}
