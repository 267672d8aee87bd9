//! Counting a tar stream as it passes: its bytes, and its entries as the
//! `tar` crate reads them (files, folders, links, the root included; not
//! the meta entries that describe the next one: pax headers `x` and `g`, GNU
//! long names `L` and `K`), and whether it ends as a tar stream ends.
//!
//! The stream passes chunk by chunk from where it comes from to where it
//! goes, whole and in order, each chunk handed on as soon as it arrives:
//! the `tar` crate reads the headers out of the chunks the stream is made
//! of and seeks over the data (no copy of it), so counting adds no buffer
//! and never changes what passes, whatever it makes of the stream.
//!
//! Owns the counting and its verdict on the stream (`CountError::Tar`);
//! must not touch a file or an engine itself: both ends are the caller's.

use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Deref;

/// What passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counted {
    /// The stream's bytes, all of them (what follows its end marker too).
    pub(super) bytes: u64,
    /// Its entries (meta entries not counted).
    pub(super) entries: u64,
    /// The sizes of its regular files, added up (a hard link's entry has
    /// none): what the files hold, as Docker's `/system/df` counts a
    /// volume's content.
    pub(super) file_bytes: u64,
}

/// Why a stream did not pass as a tar stream that ended well.
#[derive(Debug)]
pub(super) enum CountError<E> {
    /// Where it comes from or where it goes failed: that error, as it was.
    /// Nothing passed after it.
    Pass(E),
    /// It passed whole, but it is cut or malformed: why, with the bytes
    /// that passed (the words of `ArchiveError::Tar`).
    Tar(String),
}

/// Passes every chunk `next` gives to `sink`, in order, until `next` says
/// the stream has ended (`None`), and counts it on the way (see the module
/// header). A failing `next` or `sink` stops it at once (`Pass`); a stream
/// that is not a tar stream that ended well passes whole all the same, then
/// is `Tar`: it stops inside an entry, has no end marker, or has a header
/// the `tar` crate refuses (a checksum that does not match, a malformed
/// field).
pub(super) fn pass<C, E>(
    next: impl FnMut() -> Result<Option<C>, E>,
    sink: impl FnMut(&C) -> Result<(), E>,
) -> Result<Counted, CountError<E>>
where
    C: Deref<Target = [u8]>,
{
    let mut tap = Tap {
        next,
        sink,
        chunk: None,
        at: 0,
        pos: 0,
        bytes: 0,
        ended: false,
        cut: false,
        failed: None,
    };
    let mut entries = 0;
    let mut file_bytes: u64 = 0;
    let read = {
        let mut archive = tar::Archive::new(&mut tap);
        let mut read = || -> io::Result<()> {
            for entry in archive.entries_with_seek()? {
                let entry = entry?;
                let kind = entry.header().entry_type();
                if !matches!(kind.as_byte(), b'x' | b'g' | b'L' | b'K') {
                    entries += 1;
                }
                if kind.is_file() {
                    file_bytes = file_bytes.saturating_add(entry.size());
                }
            }
            Ok(())
        };
        read()
    };
    if let Some(e) = tap.failed.take() {
        return Err(CountError::Pass(e));
    }
    // Where the `tar` crate stopped, and whether it met the stream's end
    // there, before what it left passes.
    let (stopped, met_end) = (tap.pos, tap.ended);
    tap.drain().map_err(CountError::Pass)?;
    let bytes = tap.bytes;
    let why = match read {
        // Data that runs past the stream's end; a header cut short, or a
        // meta entry with no entry after it.
        _ if tap.cut => Some(format!("it stops inside an entry after {bytes} bytes")),
        Err(_) if met_end => Some(format!("it stops inside an entry after {bytes} bytes")),
        Err(e) => Some(format!("it is malformed at byte {stopped}: {e}")),
        // The stream ended where a header begins.
        Ok(()) if met_end => Some(format!("it has no end marker after {bytes} bytes")),
        Ok(()) => None,
    };
    match why {
        Some(why) => Err(CountError::Tar(why)),
        None => Ok(Counted {
            bytes,
            entries,
            file_bytes,
        }),
    }
}

/// The stream as the `tar` crate reads it: a reader over the chunk in hand
/// that takes the next one from `next` (and hands it to `sink` at once)
/// when the crate reads or seeks past it. Seeks go forward only.
struct Tap<C, E, N, S> {
    next: N,
    sink: S,
    /// The chunk in hand, and how much of it the crate has passed.
    chunk: Option<C>,
    at: usize,
    /// The crate's position in the stream.
    pos: u64,
    /// The bytes taken from `next`.
    bytes: u64,
    /// `next` said the stream has ended.
    ended: bool,
    /// The crate sought past the stream's end: an entry's data runs past it.
    cut: bool,
    /// What `next` or `sink` failed with; the crate got an error that stands
    /// for it.
    failed: Option<E>,
}

impl<C, E, N, S> Tap<C, E, N, S>
where
    C: Deref<Target = [u8]>,
    N: FnMut() -> Result<Option<C>, E>,
    S: FnMut(&C) -> Result<(), E>,
{
    /// The bytes of the chunk in hand the crate has not passed, taking the
    /// next chunk when they are none: empty once the stream has ended.
    fn left(&mut self) -> io::Result<&[u8]> {
        while self.chunk.as_ref().is_none_or(|c| self.at == c.len()) && !self.ended {
            // The chunk passed goes first (a pooled block goes home).
            self.chunk = None;
            self.at = 0;
            match self.take() {
                Ok(Some(chunk)) => self.chunk = Some(chunk),
                Ok(None) => self.ended = true,
                Err(e) => {
                    self.failed = Some(e);
                    return Err(io::Error::other("the stream stopped passing"));
                }
            }
        }
        Ok(match &self.chunk {
            Some(c) => &c[self.at..],
            None => &[],
        })
    }

    /// The next chunk from `next`, handed to `sink` and counted.
    fn take(&mut self) -> Result<Option<C>, E> {
        let Some(chunk) = (self.next)()? else {
            return Ok(None);
        };
        (self.sink)(&chunk)?;
        self.bytes += chunk.len() as u64;
        Ok(Some(chunk))
    }

    /// Passes what the crate left of the stream.
    fn drain(&mut self) -> Result<(), E> {
        self.chunk = None;
        while !self.ended {
            match self.take()? {
                Some(chunk) => drop(chunk),
                None => self.ended = true,
            }
        }
        Ok(())
    }
}

impl<C, E, N, S> Read for Tap<C, E, N, S>
where
    C: Deref<Target = [u8]>,
    N: FnMut() -> Result<Option<C>, E>,
    S: FnMut(&C) -> Result<(), E>,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.at += n;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<C, E, N, S> Seek for Tap<C, E, N, S>
where
    C: Deref<Target = [u8]>,
    N: FnMut() -> Result<Option<C>, E>,
    S: FnMut(&C) -> Result<(), E>,
{
    /// Forward only (the crate skips an entry's data with
    /// `SeekFrom::Current`); past the stream's end it stops there, as a
    /// file's end would, and says the stream was cut.
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let mut skip = match to {
            SeekFrom::Current(n) => u64::try_from(n).ok(),
            SeekFrom::Start(n) => n.checked_sub(self.pos),
            SeekFrom::End(_) => None,
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "a tar stream seeks forward"))?;
        while skip > 0 {
            let left = self.left()?.len();
            if left == 0 {
                self.cut = true;
                break;
            }
            let n = usize::try_from(skip).unwrap_or(usize::MAX).min(left);
            self.at += n;
            self.pos += n as u64;
            skip -= n as u64;
        }
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::archive::tests::sample_tar;

    /// `stream` passed in chunks of `size`: the result, and what reached the sink.
    fn pass_in(stream: &[u8], size: usize) -> (Result<Counted, CountError<String>>, Vec<u8>) {
        let mut chunks = stream.chunks(size.max(1));
        let mut out = Vec::new();
        let counted = pass(
            || Ok(chunks.next().map(<[u8]>::to_vec)),
            |c: &Vec<u8>| {
                out.extend_from_slice(c);
                Ok(())
            },
        );
        (counted, out)
    }

    /// Why `stream` is refused (`Tar`), checking that it passed whole.
    fn refused(stream: &[u8]) -> String {
        let (counted, out) = pass_in(stream, 4096);
        assert_eq!(out, stream, "it passes whole all the same");
        match counted {
            Err(CountError::Tar(why)) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// A pax extended header (`x`, or `g` for a global one) holding `records`.
    fn pax(b: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, records: &[(&str, &str)]) {
        let mut data = Vec::new();
        for (key, value) in records {
            // `<length> <key>=<value>\n`, the length counting itself.
            let rest = format!(" {key}={value}\n");
            let mut len = rest.len() + 1;
            while (len.to_string().len() + rest.len()) > len {
                len += 1;
            }
            data.extend_from_slice(format!("{len}{rest}").as_bytes());
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        entry(b, h, "PaxHeaders/x", data.len() as u64, &data);
    }

    /// An entry at `path` with header `h` (a plain file's, unless set
    /// otherwise) saying `size`, then `data`.
    fn entry(
        b: &mut tar::Builder<Vec<u8>>,
        mut h: tar::Header,
        path: &str,
        size: u64,
        data: &[u8],
    ) {
        h.set_path(path).unwrap();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    /// Three files behind pax headers, as Go's writer (Docker's) makes them:
    /// a global header, a long name, and a size the header's field cannot
    /// hold (pax `size`; the field says 0, as for a file of 8 GiB or more).
    fn pax_tar() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        pax(
            &mut b,
            tar::EntryType::XGlobalHeader,
            &[("comment", "global")],
        );
        let long = format!("ca-sbx-volume/{}", "p".repeat(200));
        pax(&mut b, tar::EntryType::XHeader, &[("path", &long)]);
        entry(
            &mut b,
            tar::Header::new_ustar(),
            "ca-sbx-volume/truncated",
            3,
            &b"abc"[..],
        );
        pax(&mut b, tar::EntryType::XHeader, &[("size", "70000")]);
        entry(
            &mut b,
            tar::Header::new_ustar(),
            "ca-sbx-volume/big",
            0,
            &[7u8; 70_000][..],
        );
        entry(
            &mut b,
            tar::Header::new_ustar(),
            "ca-sbx-volume/last",
            1,
            &b"z"[..],
        );
        b.into_inner().unwrap()
    }

    #[test]
    fn counts_a_real_tar_stream_in_any_chunks_and_passes_it_whole() {
        // GNU long names (`sample_tar`), pax headers (`pax_tar`); a stream
        // padded after its end marker (as a tar of 10 KiB records is).
        let mut padded = sample_tar();
        padded.resize(padded.len().div_ceil(10240) * 10240 + 10240, 0);
        // The files' bytes: a pax `size` counts over the header's.
        for (stream, entries, file_bytes) in [
            (sample_tar(), 4, 70_005),
            (pax_tar(), 3, 70_004),
            (padded, 4, 70_005),
        ] {
            for size in [1, 7, 512, 4096, 65_536, 1 << 20] {
                let (counted, out) = pass_in(&stream, size);
                let counted = counted.unwrap_or_else(|e| panic!("chunks of {size}: {e:?}"));
                assert_eq!(
                    counted,
                    Counted {
                        bytes: stream.len() as u64,
                        entries,
                        file_bytes,
                    },
                    "chunks of {size}"
                );
                assert_eq!(out, stream, "chunks of {size}");
            }
        }
    }

    #[test]
    fn a_stream_cut_short_or_without_its_end_marker_is_refused() {
        let tar = sample_tar();
        // Inside a header, inside a file's data, inside a long name, inside
        // the long-named file's data.
        for cut in [100, 1300, 2800, 40_000] {
            assert_eq!(
                refused(&tar[..cut]),
                format!("it stops inside an entry after {cut} bytes")
            );
        }
        // At an entry's end, where the next header would begin.
        let end = tar.len() - 1024;
        assert_eq!(
            refused(&tar[..end]),
            format!("it has no end marker after {end} bytes")
        );
        assert_eq!(refused(&[]), "it has no end marker after 0 bytes");
    }

    #[test]
    fn a_corrupt_header_is_refused_and_the_stream_still_passes_whole() {
        let mut tar = sample_tar();
        // The second header's name (`ca-sbx-volume/a.txt`): its checksum no
        // longer matches.
        tar[512] ^= 1;
        assert_eq!(
            refused(&tar),
            "it is malformed at byte 1024: archive header checksum mismatch"
        );
        // A size field that is not a number.
        let mut tar = sample_tar();
        tar[512 + 124..512 + 136].copy_from_slice(b"not a size!\0");
        let sum: u32 = tar[512..1024]
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u32::from(*b)
                }
            })
            .sum();
        tar[512 + 148..512 + 156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        let why = refused(&tar);
        assert!(why.starts_with("it is malformed at byte 1024: "), "{why}");
    }

    #[test]
    fn a_failing_source_or_sink_stops_at_once_with_its_own_error() {
        let tar = sample_tar();
        let mut chunks = tar.chunks(512);
        let mut taken = 0;
        let counted = pass(
            || {
                taken += 1;
                if taken == 3 {
                    return Err("the engine went away".to_string());
                }
                Ok(chunks.next().map(<[u8]>::to_vec))
            },
            |_: &Vec<u8>| Ok(()),
        );
        assert!(matches!(counted, Err(CountError::Pass(e)) if e == "the engine went away"));
        assert_eq!(taken, 3, "nothing taken after");

        let mut chunks = tar.chunks(512);
        let mut taken = 0;
        let mut sunk = 0;
        let counted = pass(
            || {
                taken += 1;
                Ok(chunks.next().map(<[u8]>::to_vec))
            },
            |_: &Vec<u8>| {
                sunk += 1;
                if sunk == 2 {
                    Err("disk full".to_string())
                } else {
                    Ok(())
                }
            },
        );
        assert!(matches!(counted, Err(CountError::Pass(e)) if e == "disk full"));
        assert_eq!((taken, sunk), (2, 2), "nothing taken after");
    }
}
