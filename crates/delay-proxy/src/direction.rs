//! One direction of a proxied connection (client to upstream, or back): the segments read from its source and
//! not yet written to its destination, each with the instant it may be written. Segments leave in the order
//! they came, and each one's due time is its own read time plus the one-way delay, so a segment waits for
//! the ones before it only when the destination is not taking bytes, never for their delay.

use std::collections::VecDeque;
use std::time::Instant;

/// What a segment carries to the destination.
#[derive(Debug)]
pub enum Payload {
    /// Bytes read from the source; `written` of them have reached the destination.
    Data { bytes: Vec<u8>, written: usize },
    /// The source's end of stream: the destination's write side is shut down (a half-close passes through).
    Fin,
}

#[derive(Debug)]
pub struct Segment {
    pub due: Instant,
    pub payload: Payload,
}

/// Bytes counted per queued segment on top of its data, so a stream of one-byte reads cannot hold a million
/// segments (and their allocations) under a limit meant for bytes.
pub const SEGMENT_OVERHEAD: usize = 64;

#[derive(Debug, Default)]
pub struct Direction {
    queue: VecDeque<Segment>,
    /// Data plus [`SEGMENT_OVERHEAD`] per segment, compared with the queue limit.
    queued: usize,
    /// The source said its last word (end of stream, reset) or may not be read any more: no more reads.
    source_done: bool,
    /// The end of stream was delivered: the destination's write side is shut down.
    fin_delivered: bool,
    /// When the connection is to be aborted (the source reset, or the other direction's destination
    /// vanished). Not queued behind the data: an RST discards what its sender had not yet sent, so data still
    /// waiting for a destination that does not read cannot hold it back.
    reset_due: Option<Instant>,
    /// Data bytes written to the destination.
    delivered: u64,
}

impl Direction {
    /// How many bytes may be read from the source now: none when the queue is at `limit` or the source is done.
    pub fn room(&self, limit: usize) -> usize {
        if self.source_done { 0 } else { limit.saturating_sub(self.queued + SEGMENT_OVERHEAD) }
    }

    pub fn push_data(&mut self, bytes: Vec<u8>, due: Instant) {
        self.queued += bytes.len() + SEGMENT_OVERHEAD;
        self.queue.push_back(Segment { due, payload: Payload::Data { bytes, written: 0 } });
    }

    /// The source's end of stream, to be passed on at `due` after the data before it; nothing is read from
    /// the source after.
    pub fn push_fin(&mut self, due: Instant) {
        self.source_done = true;
        self.queued += SEGMENT_OVERHEAD;
        self.queue.push_back(Segment { due, payload: Payload::Fin });
    }

    /// Aborts the connection at `due` (the first reset asked for stands); nothing is read from the source after.
    /// Data due before it is written first if the destination takes it.
    pub fn push_reset(&mut self, due: Instant) {
        self.source_done = true;
        self.reset_due.get_or_insert(due);
    }

    /// A reset asked for is due at `now`.
    pub fn reset_now(&self, now: Instant) -> bool {
        self.reset_due.is_some_and(|due| due <= now)
    }

    /// Gives up on this direction (its destination is gone): queued data dropped, the source no longer read,
    /// and the direction counts as finished.
    pub fn abandon(&mut self) {
        self.queue.clear();
        self.queued = 0;
        self.source_done = true;
        self.fin_delivered = true;
    }

    pub fn fin_delivered(&self) -> bool {
        self.fin_delivered
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The first segment, if it is due at `now`.
    pub fn due_head(&mut self, now: Instant) -> Option<&mut Segment> {
        self.queue.front_mut().filter(|segment| segment.due <= now)
    }

    /// When the first segment or the reset becomes due, whichever is first, if that is after `now`.
    pub fn next_due(&self, now: Instant) -> Option<Instant> {
        let head = self.queue.front().map(|segment| segment.due);
        [head, self.reset_due].into_iter().flatten().filter(|due| *due > now).min()
    }

    /// `n` more bytes of the first segment reached the destination; the segment leaves once all have.
    pub fn wrote(&mut self, n: usize) {
        self.delivered += n as u64;
        if let Some(Segment { payload: Payload::Data { bytes, written }, .. }) = self.queue.front_mut() {
            *written += n;
            if *written == bytes.len() {
                self.queued -= bytes.len() + SEGMENT_OVERHEAD;
                self.queue.pop_front();
            }
        }
    }

    /// The first segment, an end of stream, was passed on.
    pub fn fin_passed(&mut self) {
        self.queue.pop_front();
        self.queued -= SEGMENT_OVERHEAD;
        self.fin_delivered = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn segments_leave_in_order_each_at_its_own_due_time() {
        let start = Instant::now();
        let mut direction = Direction::default();
        direction.push_data(b"ab".to_vec(), start + Duration::from_millis(5));
        direction.push_data(b"c".to_vec(), start + Duration::from_millis(6));
        assert!(direction.due_head(start).is_none());
        assert_eq!(direction.next_due(start), Some(start + Duration::from_millis(5)));
        let later = start + Duration::from_millis(5);
        assert!(
            matches!(direction.due_head(later).map(|s| &s.payload), Some(Payload::Data { bytes, .. }) if bytes == b"ab")
        );
        direction.wrote(1);
        direction.wrote(1);
        assert!(direction.due_head(later).is_none(), "the second is not due yet");
        assert_eq!(direction.next_due(later), Some(start + Duration::from_millis(6)));
        assert_eq!(direction.delivered(), 2);
    }

    #[test]
    fn the_limit_stops_reads_and_counts_bookkeeping() {
        let mut direction = Direction::default();
        let now = Instant::now();
        assert_eq!(direction.room(1000), 1000 - SEGMENT_OVERHEAD);
        direction.push_data(vec![0; 800], now);
        assert_eq!(direction.room(1000), 1000 - 800 - 2 * SEGMENT_OVERHEAD);
        direction.push_data(vec![0; 8], now);
        assert_eq!(direction.room(1000), 0);
        direction.wrote(800);
        assert!(direction.room(1000) > 0, "room again once the destination took the bytes");
        direction.push_fin(now);
        assert_eq!(direction.room(1000), 0, "nothing is read after the end of stream");
    }
}
