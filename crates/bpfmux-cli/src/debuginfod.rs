//! What `sym`, `trace` and `report` say of debuginfod: the client made
//! from the environment, and what it gave.

use bpfmux::symbolize::debuginfod::{Debuginfod, Fetched};
use bpfmux::symbolize::DebuginfodAnswer;

/// The client `DEBUGINFOD_URLS` describes, unless `off`; a bad setting is
/// a warning (frames are named without it), not an error.
pub fn client(who: &str, off: bool) -> Option<Debuginfod> {
    if off {
        return None;
    }
    Debuginfod::from_env().unwrap_or_else(|e| {
        eprintln!("{who}: warning: no debuginfod lookups: {e}");
        None
    })
}

/// Files debuginfod gave: downloaded (from which servers) or from its
/// cache.
#[derive(Default)]
pub struct Tally {
    servers: Vec<String>,
    downloaded: usize,
    cached: usize,
}

impl Tally {
    pub fn add(&mut self, f: &Fetched) {
        match &f.server {
            Some(url) => {
                self.downloaded += 1;
                if !self.servers.contains(url) {
                    self.servers.push(url.clone());
                }
            }
            None => self.cached += 1,
        }
    }

    /// `WHO: debuginfod: N file(s) downloaded from URL, M from its cache`,
    /// if it gave any.
    pub fn tell(&self, who: &str) {
        if self.downloaded + self.cached == 0 {
            return;
        }
        let from = if self.servers.is_empty() {
            String::new()
        } else {
            format!(" from {}", self.servers.join(", "))
        };
        eprintln!(
            "{who}: debuginfod: {} file(s) downloaded{from}, {} from its cache",
            self.downloaded, self.cached
        );
    }
}

/// Says what debuginfod answered for live processes' files: with -v each
/// file named from a debug file it gave; always a warning for each file it
/// had none for, and the tally.
pub fn tell_answers(who: &str, verbose: u8, answers: &[DebuginfodAnswer]) {
    let mut tally = Tally::default();
    for a in answers {
        let name = a.name.display();
        match &a.result {
            Ok(f) => {
                tally.add(f);
                if verbose > 0 {
                    let from = f.server.as_deref().unwrap_or("debuginfod's cache");
                    eprintln!(
                        "  {name} (build ID {}): named from its debug file from {from}, {}",
                        a.build_id,
                        f.file.display()
                    );
                }
            }
            Err(why) => eprintln!(
                "{who}: warning: {name} (build ID {}) has no DWARF here and debuginfod gave \
                 no debug file ({why}): named from its own symbols",
                a.build_id
            ),
        }
    }
    tally.tell(who);
}
