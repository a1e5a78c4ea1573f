//! A server crate's own server, started in its test's process.

/// Declares `$name`: the crate's server (a `serve::Server`) running in the test's own process on one listener,
/// and the address it answers on. `$name::start_with_limits(settings, limits)` binds `settings.addr` (port 0:
/// an ephemeral one) and starts `$start(settings, listeners, limits)` on it; `get(target)` sends it a GET.
/// Dropping it shuts the server down gracefully (serve::Server's own Drop).
///
/// A macro rather than a type because testkit does not depend on serve: the declaration is expanded in the
/// server crate's tests, which do.
#[macro_export]
macro_rules! in_process_server {
    ($name:ident, $settings:ty, $start:path) => {
        pub struct $name {
            // Held for its Drop: the server runs until then.
            _server: serve::Server,
            pub addr: std::net::SocketAddr,
        }

        impl $name {
            pub fn start_with_limits(settings: $settings, limits: serve::Limits) -> $name {
                let listeners = serve::bind_reuseport(settings.addr, 1).expect("bind");
                let server = $start(settings, listeners, limits).expect("start");
                let addr = server.local_addr();
                $name { _server: server, addr }
            }

            pub fn get(&self, target: &str) -> $crate::http::Response {
                $crate::http::get(self.addr, target)
            }
        }
    };
}
