//! The two sides' HTTP/2 settings: ours ([`Config`], what the client advertises and enforces) and the
//! server's ([`ServerSettings`], as its SETTINGS frames left them). Plain values, apart from `h2` so the
//! client's logic is not buried under them; `h2` re-exports both, which is where callers name them.

use crate::h2_frame as frame;

/// `:scheme`: "https" over TLS, "http" for h2c.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheme {
    #[default]
    Http,
    Https,
}

impl Scheme {
    pub(crate) fn name(self) -> &'static [u8] {
        match self {
            Scheme::Http => b"http",
            Scheme::Https => b"https",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub scheme: Scheme,
    /// SETTINGS_INITIAL_WINDOW_SIZE: how much each stream may receive before we replenish (at most 2^31-1).
    pub stream_window: u32,
    /// The connection's receive window (at least 65,535, its fixed initial value; at most 2^31-1).
    pub connection_window: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a response's header list (names, values and 32 bytes per field) and
    /// its compressed block may not exceed it.
    pub max_header_list: u32,
    /// SETTINGS_MAX_FRAME_SIZE (16,384 to 2^24-1): the largest frame we accept, and so the most the worker
    /// ever buffers of an incomplete frame (plus its 9-byte header).
    pub max_frame_size: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scheme: Scheme::Http,
            stream_window: (1 << 30) - 1,
            connection_window: (1 << 30) - 1,
            max_header_list: 64 * 1024,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

impl Config {
    /// The config with out-of-range settings brought into range.
    pub(crate) fn clamped(self) -> Config {
        Config {
            stream_window: self.stream_window.min(frame::MAX_WINDOW),
            connection_window: self.connection_window.clamp(frame::DEFAULT_WINDOW, frame::MAX_WINDOW),
            max_frame_size: self.max_frame_size.clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_FRAME_SIZE_LIMIT),
            ..self
        }
    }

    /// Writes our SETTINGS frame: push off, our stream window, header list and frame size (the last only when
    /// it is not the default).
    pub(crate) fn write_settings(&self, out: &mut Vec<u8>) {
        let settings = [
            (frame::SETTINGS_ENABLE_PUSH, 0),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, self.stream_window),
            (frame::SETTINGS_MAX_HEADER_LIST_SIZE, self.max_header_list),
            (frame::SETTINGS_MAX_FRAME_SIZE, self.max_frame_size),
        ];
        let n = if self.max_frame_size == frame::DEFAULT_MAX_FRAME_SIZE { 3 } else { 4 };
        frame::write_settings(out, &settings[..n]);
    }
}

/// The server's SETTINGS as they stand (the RFC's initial values until it sends them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSettings {
    pub header_table_size: u32,
    /// What the server said (false unless it sent 0; a server may not send 1, that is a connection error).
    pub enable_push: bool,
    /// None: unlimited.
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    /// None: unlimited (advisory anyway).
    pub max_header_list_size: Option<u32>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            header_table_size: 4096,
            enable_push: false,
            max_concurrent_streams: None,
            initial_window_size: frame::DEFAULT_WINDOW,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: None,
        }
    }
}
