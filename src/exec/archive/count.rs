//! Counting a tar stream as it passes: its bytes, and its entries (files,
//! folders, links, the root included; not the meta entries that describe
//! the next one: pax headers `x` and `g`, GNU long names `L` and `K`), read
//! from the headers as the stream goes by, and whether it ends as a tar
//! stream ends.
//!
//! Owns the counting and its verdict on the stream; must not touch a file
//! or an engine.

use super::ArchiveError;

/// Counts a tar stream's bytes and entries as it streams by, reading only
/// the headers (meta entries: pax and GNU long names are not counted).
#[derive(Debug, Default)]
pub(crate) struct TarCount {
    /// Bytes seen.
    pub(crate) bytes: u64,
    /// Entries seen.
    pub(crate) entries: u64,
    /// The header being gathered.
    header: Vec<u8>,
    /// Bytes of the current entry's data (and padding) still to pass.
    skip: u64,
    /// A zero block (the end of the archive) was seen.
    ended: bool,
}

impl TarCount {
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.skip -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (512 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.header.len() < 512 {
                break;
            }
            if self.header.iter().all(|&b| b == 0) {
                self.ended = true;
            } else if !self.ended {
                let size = tar_size(&self.header[124..136]);
                if !matches!(self.header[156], b'x' | b'g' | b'L' | b'K') {
                    self.entries += 1;
                }
                self.skip = size.div_ceil(512) * 512;
            }
            self.header.clear();
        }
    }

    /// Whether the stream ended on a block boundary, with its end marker.
    pub(crate) fn check(&self) -> Result<(), ArchiveError> {
        if self.skip > 0 || !self.header.is_empty() {
            return Err(ArchiveError::Tar(format!(
                "it stops inside an entry after {} bytes",
                self.bytes
            )));
        }
        if !self.ended {
            return Err(ArchiveError::Tar(format!(
                "it has no end marker after {} bytes",
                self.bytes
            )));
        }
        Ok(())
    }
}

/// A tar header's size field: octal, or base-256 when its first bit is set.
fn tar_size(field: &[u8]) -> u64 {
    if field[0] & 0x80 != 0 {
        return field[1..].iter().fold(0u64, |n, &b| {
            n.saturating_mul(256).saturating_add(u64::from(b))
        });
    }
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    u64::from_str_radix(text.trim(), 8).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::archive::tests::sample_tar;

    #[test]
    fn counts_tar_entries_as_they_stream_in_any_chunks() {
        let tar = sample_tar();
        let mut whole = TarCount::default();
        whole.feed(&tar);
        assert_eq!(whole.entries, 4);
        assert_eq!(whole.bytes, tar.len() as u64);
        whole.check().unwrap();
        let mut bytewise = TarCount::default();
        for c in tar.chunks(1) {
            bytewise.feed(c);
        }
        assert_eq!((bytewise.entries, bytewise.bytes), (4, tar.len() as u64));
        let mut cut = TarCount::default();
        cut.feed(&tar[..1000]);
        assert!(matches!(cut.check(), Err(ArchiveError::Tar(_))));
    }
}
