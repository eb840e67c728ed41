//! PROCMAP_QUERY: one real ioctl on our own /proc/self/maps.

use super::Probe;

pub fn probe() -> Probe {
    match crate::normalize::procmap_query_supported() {
        Ok(true) => Probe::yes("ioctl(PROCMAP_QUERY) on /proc/self/maps answered"),
        Ok(false) => Probe::no("ioctl(PROCMAP_QUERY) on /proc/self/maps: ENOTTY"),
        Err(e) => Probe::from_io("ioctl(PROCMAP_QUERY) on /proc/self/maps", &e),
    }
}
