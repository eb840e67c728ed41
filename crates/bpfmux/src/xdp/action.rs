//! XDP return codes and the "chain on" sets built from them: after a
//! program returns action `a`, the next program runs iff `a` is in the set.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The actions by name, in UAPI order (`enum xdp_action`).
pub const ACTION_NAMES: [&str; 5] = ["aborted", "drop", "pass", "tx", "redirect"];

/// A set of XDP return codes as a bitmap (bit `a` = action `a`), the form
/// the dispatcher reads and the kernel chain calls are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionSet(pub u32);

impl ActionSet {
    /// Every return code, known or not (the wildcard).
    pub const ANY: ActionSet = ActionSet(u32::MAX);
    /// libxdp's and bpfmux's default: continue after XDP_PASS.
    pub const DEFAULT: ActionSet = ActionSet(1 << 2);

    /// Whether return code `action` is in the set.
    pub fn contains(self, action: u32) -> bool {
        action < 32 && self.0 & (1 << action) != 0
    }

    /// Return codes in the set, lowest first.
    pub fn actions(self) -> impl Iterator<Item = u32> {
        (0..32).filter(move |&a| self.contains(a))
    }
}

impl Default for ActionSet {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// `pass`, `drop`, ... for the XDP actions, the number for other codes.
pub fn action_name(action: u32) -> String {
    ACTION_NAMES
        .get(action as usize)
        .map_or_else(|| action.to_string(), |s| s.to_string())
}

impl fmt::Display for ActionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::ANY {
            return f.write_str("any");
        }
        if self.0 == 0 {
            return f.write_str("none");
        }
        let names: Vec<String> = self.actions().map(action_name).collect();
        f.write_str(&names.join(","))
    }
}

/// A chain-on value that names no set of XDP actions.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActionSetError {
    /// `any`, `*`, `all` or `none` in a list: each stands for the whole set.
    #[error("'{0}' stands alone: give it as the whole value, not in a list")]
    StandsAlone(String),
    /// Not an action's name or number.
    #[error("{0}")]
    Unknown(String),
}

impl FromStr for ActionSet {
    type Err = ActionSetError;

    /// `pass,tx`, `drop`, `none`, `any` (or `*`), numbers 0–31 for codes
    /// without a name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        match s {
            "any" | "*" | "all" => return Ok(Self::ANY),
            "none" | "" => return Ok(Self(0)),
            _ => {}
        }
        let mut bits = 0u32;
        for word in s.split(',').map(str::trim) {
            if matches!(word, "any" | "*" | "all" | "none") {
                return Err(ActionSetError::StandsAlone(word.to_string()));
            }
            let lower = word.to_ascii_lowercase();
            let lower = lower.strip_prefix("xdp_").unwrap_or(&lower);
            let action = match ACTION_NAMES.iter().position(|n| *n == lower) {
                Some(a) => a as u32,
                None => match lower.parse::<u32>() {
                    Ok(n) if n < 32 => n,
                    _ => {
                        return Err(ActionSetError::Unknown(format!(
                            "unknown XDP action '{word}' (expected a list of {} or numbers 0-31, \
                             or 'none' or 'any' alone)",
                            ACTION_NAMES.join(", ")
                        )))
                    }
                },
            };
            bits |= 1 << action;
        }
        Ok(Self(bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_numbers_and_wildcards() {
        assert_eq!("pass".parse::<ActionSet>().unwrap(), ActionSet(1 << 2));
        assert_eq!(
            "pass,TX,xdp_drop".parse::<ActionSet>().unwrap(),
            ActionSet((1 << 2) | (1 << 3) | (1 << 1))
        );
        assert_eq!("7".parse::<ActionSet>().unwrap(), ActionSet(1 << 7));
        assert_eq!("any".parse::<ActionSet>().unwrap(), ActionSet::ANY);
        assert_eq!("none".parse::<ActionSet>().unwrap(), ActionSet(0));
        assert!("pas".parse::<ActionSet>().is_err());
        assert!("32".parse::<ActionSet>().is_err());
        let e = "any,none".parse::<ActionSet>().unwrap_err();
        assert!(e.to_string().contains("'any' stands alone"), "{e}");
        assert!("pass,none".parse::<ActionSet>().is_err());
        assert!("pass,".parse::<ActionSet>().is_err());
    }

    #[test]
    fn displays_round_trip() {
        for s in [
            "pass",
            "drop,pass",
            "aborted,tx,redirect",
            "any",
            "none",
            "pass,9",
        ] {
            let set: ActionSet = s.parse().unwrap();
            assert_eq!(set.to_string(), s);
        }
    }
}
