//! Local time for the context block, without a time zone database in the module: the common IANA
//! zones with their current rules (standard offset, and the EU, US, Australian or New Zealand daylight
//! saving rule), or a fixed `UTC±HH:MM`. A zone that is not listed is refused at configuration time.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    None,
    /// Last Sunday of March 01:00 UTC to last Sunday of October 01:00 UTC.
    Eu,
    /// Second Sunday of March 02:00 local to first Sunday of November 02:00 local.
    Us,
    /// First Sunday of October 02:00 local to first Sunday of April 03:00 local (southern).
    Au,
    /// Last Sunday of September 02:00 local to first Sunday of April 03:00 local (southern).
    Nz,
}

/// A time zone: its name as configured, standard offset in minutes east of UTC, and DST rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub name: String,
    std_min: i32,
    dst: Dst,
}

const ZONES: &[(&str, i32, Dst)] = &[
    ("UTC", 0, Dst::None),
    ("Etc/UTC", 0, Dst::None),
    ("Europe/London", 0, Dst::Eu),
    ("Europe/Dublin", 0, Dst::Eu),
    ("Europe/Lisbon", 0, Dst::Eu),
    ("Europe/Berlin", 60, Dst::Eu),
    ("Europe/Paris", 60, Dst::Eu),
    ("Europe/Madrid", 60, Dst::Eu),
    ("Europe/Rome", 60, Dst::Eu),
    ("Europe/Amsterdam", 60, Dst::Eu),
    ("Europe/Brussels", 60, Dst::Eu),
    ("Europe/Vienna", 60, Dst::Eu),
    ("Europe/Zurich", 60, Dst::Eu),
    ("Europe/Stockholm", 60, Dst::Eu),
    ("Europe/Oslo", 60, Dst::Eu),
    ("Europe/Copenhagen", 60, Dst::Eu),
    ("Europe/Warsaw", 60, Dst::Eu),
    ("Europe/Prague", 60, Dst::Eu),
    ("Europe/Budapest", 60, Dst::Eu),
    ("Europe/Athens", 120, Dst::Eu),
    ("Europe/Helsinki", 120, Dst::Eu),
    ("Europe/Kyiv", 120, Dst::Eu),
    ("Europe/Bucharest", 120, Dst::Eu),
    ("Europe/Istanbul", 180, Dst::None),
    ("Europe/Moscow", 180, Dst::None),
    ("America/New_York", -300, Dst::Us),
    ("America/Toronto", -300, Dst::Us),
    ("America/Chicago", -360, Dst::Us),
    ("America/Denver", -420, Dst::Us),
    ("America/Phoenix", -420, Dst::None),
    ("America/Los_Angeles", -480, Dst::Us),
    ("America/Vancouver", -480, Dst::Us),
    ("America/Anchorage", -540, Dst::Us),
    ("Pacific/Honolulu", -600, Dst::None),
    ("America/Mexico_City", -360, Dst::None),
    ("America/Bogota", -300, Dst::None),
    ("America/Lima", -300, Dst::None),
    ("America/Sao_Paulo", -180, Dst::None),
    ("America/Argentina/Buenos_Aires", -180, Dst::None),
    ("Asia/Shanghai", 480, Dst::None),
    ("Asia/Hong_Kong", 480, Dst::None),
    ("Asia/Taipei", 480, Dst::None),
    ("Asia/Singapore", 480, Dst::None),
    ("Asia/Manila", 480, Dst::None),
    ("Asia/Tokyo", 540, Dst::None),
    ("Asia/Seoul", 540, Dst::None),
    ("Asia/Kolkata", 330, Dst::None),
    ("Asia/Dubai", 240, Dst::None),
    ("Asia/Karachi", 300, Dst::None),
    ("Asia/Dhaka", 360, Dst::None),
    ("Asia/Bangkok", 420, Dst::None),
    ("Asia/Jakarta", 420, Dst::None),
    ("Asia/Ho_Chi_Minh", 420, Dst::None),
    ("Asia/Riyadh", 180, Dst::None),
    ("Asia/Tehran", 210, Dst::None),
    ("Africa/Johannesburg", 120, Dst::None),
    ("Africa/Lagos", 60, Dst::None),
    ("Africa/Nairobi", 180, Dst::None),
    ("Australia/Sydney", 600, Dst::Au),
    ("Australia/Melbourne", 600, Dst::Au),
    ("Australia/Adelaide", 570, Dst::Au),
    ("Australia/Brisbane", 600, Dst::None),
    ("Australia/Perth", 480, Dst::None),
    ("Pacific/Auckland", 720, Dst::Nz),
];

impl Zone {
    pub fn utc() -> Zone {
        Zone { name: "UTC".into(), std_min: 0, dst: Dst::None }
    }

    /// A listed IANA name, or `UTC+HH:MM` / `UTC-HH:MM`.
    pub fn parse(name: &str) -> Result<Zone, String> {
        if let Some((_, std, dst)) = ZONES.iter().find(|(n, ..)| *n == name) {
            return Ok(Zone { name: name.to_string(), std_min: *std, dst: *dst });
        }
        if let Some(offset) = name.strip_prefix("UTC").and_then(fixed_offset) {
            return Ok(Zone { name: name.to_string(), std_min: offset, dst: Dst::None });
        }
        Err(format!(
            "'{name}' is not a supported time zone: use UTC±HH:MM or one of {}",
            ZONES.iter().map(|(n, ..)| *n).collect::<Vec<_>>().join(", ")
        ))
    }

    /// Minutes east of UTC at `unix_s`.
    pub fn offset_at(&self, unix_s: i64) -> i32 {
        let year = civil(unix_s.div_euclid(86_400)).0;
        let std = i64::from(self.std_min) * 60;
        let local_std = |y, m, day, h: i64| days_from_civil(y, m, day) * 86_400 + h * 3600 - std;
        let in_dst = match self.dst {
            Dst::None => false,
            Dst::Eu => {
                let start = days_from_civil(year, 3, last_sunday(year, 3)) * 86_400 + 3600;
                let end = days_from_civil(year, 10, last_sunday(year, 10)) * 86_400 + 3600;
                (start..end).contains(&unix_s)
            }
            Dst::Us => {
                let start = local_std(year, 3, nth_sunday(year, 3, 2), 2);
                let end = local_std(year, 11, nth_sunday(year, 11, 1), 1);
                (start..end).contains(&unix_s)
            }
            Dst::Au => {
                let end = local_std(year, 4, nth_sunday(year, 4, 1), 2);
                let start = local_std(year, 10, nth_sunday(year, 10, 1), 2);
                unix_s < end || unix_s >= start
            }
            Dst::Nz => {
                let end = local_std(year, 4, nth_sunday(year, 4, 1), 2);
                let start = local_std(year, 9, last_sunday(year, 9), 2);
                unix_s < end || unix_s >= start
            }
        };
        self.std_min + if in_dst { 60 } else { 0 }
    }

    /// `2026-11-22 21:11 (Europe/Berlin, UTC+01:00)`.
    pub fn format(&self, unix_s: i64) -> String {
        let offset = self.offset_at(unix_s);
        let local = unix_s + i64::from(offset) * 60;
        let (y, m, d) = civil(local.div_euclid(86_400));
        let secs = local.rem_euclid(86_400);
        let sign = if offset < 0 { '-' } else { '+' };
        let (oh, om) = (offset.abs() / 60, offset.abs() % 60);
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02} ({}, UTC{sign}{oh:02}:{om:02})",
            secs / 3600,
            secs % 3600 / 60,
            self.name
        )
    }
}

/// `+05:30`, `-08`, `+0530` → minutes.
fn fixed_offset(s: &str) -> Option<i32> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let h: i32 = digits[..2].parse().ok()?;
    let m: i32 = if digits.len() == 4 { digits[2..].parse().ok()? } else { 0 };
    (h <= 14 && m < 60).then_some(sign * (h * 60 + m))
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// 0 = Sunday.
fn weekday(days: i64) -> i64 {
    (days + 4).rem_euclid(7)
}

fn nth_sunday(y: i64, m: i64, n: i64) -> i64 {
    let first = days_from_civil(y, m, 1);
    1 + (7 - weekday(first)) % 7 + (n - 1) * 7
}

fn last_sunday(y: i64, m: i64) -> i64 {
    let next = if m == 12 { days_from_civil(y + 1, 1, 1) } else { days_from_civil(y, m + 1, 1) };
    let last = next - 1;
    civil(last).2 - weekday(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> i64 {
        // "YYYY-MM-DD HH:MM" in UTC.
        let p = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
        days_from_civil(p(0, 4), p(5, 7), p(8, 10)) * 86_400 + p(11, 13) * 3600 + p(14, 16) * 60
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000, -1, 0, 1, 19_000, 20_414, 100_000] {
            let (y, m, d) = civil(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(weekday(days_from_civil(2026, 11, 22)), 0, "a Sunday");
    }

    #[test]
    fn daylight_saving_transitions() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        assert_eq!(berlin.offset_at(at("2026-03-29 00:59")), 60);
        assert_eq!(berlin.offset_at(at("2026-03-29 01:00")), 120);
        assert_eq!(berlin.offset_at(at("2026-10-25 00:59")), 120);
        assert_eq!(berlin.offset_at(at("2026-10-25 01:00")), 60);
        let ny = Zone::parse("America/New_York").unwrap();
        assert_eq!(ny.offset_at(at("2026-03-08 06:59")), -300);
        assert_eq!(ny.offset_at(at("2026-03-08 07:00")), -240);
        assert_eq!(ny.offset_at(at("2026-11-01 05:59")), -240);
        assert_eq!(ny.offset_at(at("2026-11-01 06:00")), -300);
        let sydney = Zone::parse("Australia/Sydney").unwrap();
        assert_eq!(sydney.offset_at(at("2026-01-15 00:00")), 660);
        assert_eq!(sydney.offset_at(at("2026-06-15 00:00")), 600);
        let auckland = Zone::parse("Pacific/Auckland").unwrap();
        assert_eq!(auckland.offset_at(at("2026-12-01 00:00")), 780);
        assert_eq!(Zone::parse("Asia/Shanghai").unwrap().offset_at(at("2026-07-01 00:00")), 480);
    }

    #[test]
    fn formats_and_fixed_offsets() {
        assert_eq!(Zone::utc().format(at("2026-11-22 19:05")), "2026-11-22 19:05 (UTC, UTC+00:00)");
        assert_eq!(
            Zone::parse("Asia/Kolkata").unwrap().format(at("2026-11-22 19:05")),
            "2026-11-23 00:35 (Asia/Kolkata, UTC+05:30)"
        );
        assert_eq!(
            Zone::parse("UTC-03:30").unwrap().format(at("2026-01-01 01:00")),
            "2025-12-31 21:30 (UTC-03:30, UTC-03:30)"
        );
        assert!(Zone::parse("Mars/Olympus").unwrap_err().contains("not a supported time zone"));
        assert!(Zone::parse("UTC+15").is_err());
    }
}
