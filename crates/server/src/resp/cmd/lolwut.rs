//! LOLWUT [VERSION v] [args ...]: Redis's computer art, as Redis 7.0.15
//! draws it (lolwut.c, lolwut5.c, lolwut6.c). Version 7 has no art: it
//! answers "Redis ver. 7.0.15". VERSION 5 draws Georg Nees's "Schotter"
//! in Braille dots and VERSION 6 a skyline in four terminal grays; both
//! use random numbers, so only their shape (size, parameters, captions)
//! can match Redis's, which draws from C's `rand()`.
use crate::exec::meta::REDIS_VERSION;
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use std::f64::consts::PI;

pub const COMMANDS: &[Def] = &[Def::new("lolwut", lolwut)];

/// LOLWUT [VERSION v] [...] → verbatim text (a bulk string in RESP2).
fn lolwut(ctx: &mut Ctx) -> CmdResult {
    let mut first = 1;
    // Redis prints the version as "%u.0.0" and looks at its first
    // characters, so only 5 and 6 pick art; anything else is "unstable".
    let mut version = None;
    if ctx.argc() >= 3 && args::is(ctx.arg(1), "version") {
        version = Some(args::int(ctx.arg(2))? as u32);
        first = 3;
    }
    // The version's own numeric arguments, each a `long`.
    let mut nums = Vec::new();
    if matches!(version, Some(5 | 6)) {
        for i in first..ctx.argc().min(first + 3) {
            nums.push(args::int(ctx.arg(i))?);
        }
    }
    let text = match version {
        Some(5) => schotter(&nums),
        Some(6) => skyline(&nums),
        _ => format!("Redis ver. {REDIS_VERSION}\n"),
    };
    ctx.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// C's `rand()`: 0..=RAND_MAX (2^31 - 1).
fn rand() -> i32 {
    (rand::random::<u32>() >> 1) as i32
}

const RAND_MAX: f32 = 2_147_483_647.0;

/// A grid of pixels, each a color; writes outside it are dropped.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![bg; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham's line from (x1, y1) to (x2, y2).
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on (x, y), `size` wide, turned by `angle` radians:
    /// its corners are points of the circumscribed circle, 90° apart.
    /// The arithmetic keeps C's mix of float and double.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis divides by this literal, not by the exact root of 2.
        #[allow(clippy::approx_constant)]
        let size = ((size as f64 / 1.4142135623) as f32 as f64).round() as f32;
        let mut k = (PI / 4.0 + angle as f64) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }

    /// Each 2x4 block of pixels as one Braille character (U+2800 plus a
    /// bit per dot), rows of them separated by newlines.
    fn braille(&self) -> String {
        let mut text = String::new();
        let mut y = 0;
        while y < self.height {
            let mut x = 0;
            while x < self.width {
                let dots = [
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (0, 3),
                    (1, 3),
                ];
                let mut byte = 0u32;
                for (bit, (dx, dy)) in dots.iter().enumerate() {
                    if self.get(x + dx, y + dy) != 0 {
                        byte |= 1 << bit;
                    }
                }
                text.push(char::from_u32(0x2800 + byte).expect("Braille block is valid"));
                x += 2;
            }
            if y != self.height - 1 {
                text.push('\n');
            }
            y += 4;
        }
        text
    }
}

/// LOLWUT VERSION 5 [cols] [squares-per-row] [squares-per-col]: a grid of
/// squares, turned and shifted more at random the lower the row.
fn schotter(nums: &[i64]) -> String {
    let cols = nums.first().copied().unwrap_or(66).clamp(1, 1000) as i32;
    let per_row = nums.get(1).copied().unwrap_or(8).clamp(1, 200) as i32;
    let per_col = nums.get(2).copied().unwrap_or(12).clamp(1, 200) as i32;
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let r = || rand() as f32 / RAND_MAX / per_col as f32 * y as f32;
                let (mut r1, mut r2, mut r3) = (r(), r(), r());
                if rand() % 2 != 0 {
                    r1 = -r1;
                }
                if rand() % 2 != 0 {
                    r2 = -r2;
                }
                if rand() % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    format!(
        "{}\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n",
        canvas.braille()
    )
}

/// One building of the skyline: its left edge, size, color and whether it
/// has windows (randomly lit in the two grays other than its own).
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn draw_skyscraper(canvas: &mut Canvas, si: &Skyscraper) {
    let starty = canvas.height - 1;
    let endy = starty - si.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in si.xoff..si.xoff + si.width {
            // The roof is four pixels narrower.
            if y == endy && (x <= si.xoff + 1 || x >= si.xoff + si.width - 2) {
                continue;
            }
            let mut color = si.color;
            if si.windows
                && x > si.xoff + 1
                && x < si.xoff + si.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (si.xoff + 1);
                let rely = y - (endy + 1);
                // Windows two pixels wide and one tall: terminal cells are
                // not square.
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = (1 + rand() % 2) as u8;
                        if color != si.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, color);
        }
        y -= 1;
    }
}

/// LOLWUT VERSION 6 [cols] [rows]: two rows of gray buildings behind a
/// row of black ones with windows, on a white sky.
fn skyline(nums: &[i64]) -> String {
    let cols = nums.first().copied().unwrap_or(80).clamp(1, 1000) as i32;
    let rows = nums.get(1).copied().unwrap_or(20).clamp(1, 1000) as i32;
    let mut canvas = Canvas::new(cols, rows, 3);
    let h = canvas.height;
    // The lighter buildings first, so they stay in the background.
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += rand() % 8;
            let width = 10 + rand() % 9;
            let height = if color == 2 {
                h / 2 + (rand() % h) / 2
            } else {
                h / 2 + (rand() % h) / 3
            };
            let si = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            draw_skyscraper(&mut canvas, &si);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += rand() % 8;
        let mut width = 5 + rand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let si = Skyscraper {
            xoff: offset,
            width,
            height: h / 3 + (rand() % h) / 2,
            windows: true,
            color: 0,
        };
        draw_skyscraper(&mut canvas, &si);
        offset += width + 5;
    }
    let mut text = String::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let ce = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(ce);
            text.push_str(" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.push_str(REDIS_VERSION);
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schotter_without_randomness_matches_redis() {
        // Two rows of squares use no random numbers; Redis 7.0.15 answers
        // this to LOLWUT VERSION 5 10 3 2.
        let want = "⢰⠒⠒⢲⠒⠒⣶⠒⠒⡆\n\
                    ⢸⣀⣀⣸⣀⣀⣿⣀⣀⡇\n\
                    ⢸⠀⠀⢸⠀⠀⣿⠀⠀⡇\n\
                    ⠘⠒⠒⠚⠒⠒⠛⠒⠒⠃\n\
                    \nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n";
        assert_eq!(schotter(&[10, 3, 2]), want);
    }

    #[test]
    fn skyline_has_the_asked_size() {
        let text = skyline(&[7, 3]);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3 + 2);
        for r in &rows[..3] {
            assert_eq!(r.matches(" \x1b[0m").count(), 7);
        }
    }
}
