//! Mobility: where the vehicle is at time t, and where the access points are; where the nodes of
//! a topology are (fixed, or moving between random waypoints).
//!
//! Routes: a straight road past road-side units, a loop of which a stretch is covered by one
//! access point (seed 002's 2 km drive), and a Manhattan grid with road-side units at random
//! intersections (seed 000 §V.D). Positions are in metres; the random grid and the turns are
//! drawn from a seeded generator.

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A point in the plane, metres.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Point {
    pub fn dist(self, o: Point) -> f64 {
        ((self.x - o.x).powi(2) + (self.y - o.y).powi(2)).sqrt()
    }
}

/// Route description.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// Along x from `start_m`, access points at `aps_m` along the road, `offset_m` beside it.
    Straight {
        start_m: f64,
        aps_m: Vec<f64>,
        offset_m: f64,
    },
    /// A loop of `length_m`; one access point beside the road at `ap_at_m` along the loop.
    Loop {
        length_m: f64,
        ap_at_m: f64,
        offset_m: f64,
    },
    /// A grid of `blocks` × `blocks` blocks of `block_m`; `rsus` road-side units at random
    /// intersections; the vehicle turns at random at every intersection.
    Grid {
        blocks: u32,
        block_m: f64,
        rsus: u32,
    },
}

/// A precomputed trajectory: positions sampled every `step`.
#[derive(Debug, Clone)]
pub struct Mobility {
    step: Duration,
    positions: Vec<Point>,
    aps: Vec<Point>,
}

impl Mobility {
    pub fn new(route: &Route, speed_mps: f64, duration: Duration, seed: u64) -> Self {
        let step = Duration::from_millis(100);
        let n = (duration.as_secs_f64() / step.as_secs_f64()).ceil() as usize + 2;
        let dt = step.as_secs_f64();
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x6d6f_6269_6c69_7479);
        match route {
            Route::Straight {
                start_m,
                aps_m,
                offset_m,
            } => Mobility {
                step,
                positions: (0..n)
                    .map(|k| Point {
                        x: start_m + speed_mps * dt * k as f64,
                        y: 0.0,
                    })
                    .collect(),
                aps: aps_m.iter().map(|&x| Point { x, y: *offset_m }).collect(),
            },
            Route::Loop {
                length_m,
                ap_at_m,
                offset_m,
            } => {
                let r = length_m / std::f64::consts::TAU;
                let at = |s: f64| {
                    let a = s / r;
                    Point {
                        x: r * a.cos(),
                        y: r * a.sin(),
                    }
                };
                let ap = {
                    let a = ap_at_m / r;
                    Point {
                        x: (r + offset_m) * a.cos(),
                        y: (r + offset_m) * a.sin(),
                    }
                };
                Mobility {
                    step,
                    positions: (0..n).map(|k| at(speed_mps * dt * k as f64)).collect(),
                    aps: vec![ap],
                }
            }
            Route::Grid {
                blocks,
                block_m,
                rsus,
            } => {
                let b = i64::from(*blocks);
                let mut rsu_set = Vec::new();
                while (rsu_set.len() as u32) < (*rsus).min(((b + 1) * (b + 1)) as u32) {
                    let p = (rng.random_range(0..=b), rng.random_range(0..=b));
                    if !rsu_set.contains(&p) {
                        rsu_set.push(p);
                    }
                }
                // Drive from intersection to intersection, turning at random.
                let mut cell = (b / 2, b / 2);
                let mut dir: (i64, i64) = (1, 0);
                let mut positions = Vec::with_capacity(n);
                let mut progress = 0.0;
                let mut next = (cell.0 + dir.0, cell.1 + dir.1);
                for _ in 0..n {
                    let p = Point {
                        x: (cell.0 as f64 + dir.0 as f64 * progress / block_m) * block_m,
                        y: (cell.1 as f64 + dir.1 as f64 * progress / block_m) * block_m,
                    };
                    positions.push(p);
                    progress += speed_mps * dt;
                    while progress >= *block_m {
                        progress -= block_m;
                        cell = next;
                        // Straight, left or right, staying inside the grid.
                        let options: Vec<(i64, i64)> =
                            [dir, (-dir.1, dir.0), (dir.1, -dir.0), (-dir.0, -dir.1)]
                                .into_iter()
                                .filter(|d| {
                                    let c = (cell.0 + d.0, cell.1 + d.1);
                                    (0..=b).contains(&c.0) && (0..=b).contains(&c.1)
                                })
                                .collect();
                        // U-turns only at dead ends.
                        let forward: Vec<_> = options
                            .iter()
                            .copied()
                            .filter(|d| *d != (-dir.0, -dir.1))
                            .collect();
                        let pool = if forward.is_empty() { options } else { forward };
                        dir = pool[rng.random_range(0..pool.len())];
                        next = (cell.0 + dir.0, cell.1 + dir.1);
                    }
                }
                Mobility {
                    step,
                    positions,
                    aps: rsu_set
                        .into_iter()
                        .map(|(i, j)| Point {
                            x: i as f64 * block_m + 5.0,
                            y: j as f64 * block_m + 5.0,
                        })
                        .collect(),
                }
            }
        }
    }

    /// A node that stays at `p`.
    pub fn fixed(p: Point) -> Self {
        Mobility {
            step: Duration::from_secs(3600),
            positions: vec![p, p],
            aps: Vec::new(),
        }
    }

    /// Random waypoint in [0, w] × [0, h]: from a random start, legs to random points at a
    /// speed drawn from `speed` (m/s), a `pause` at each point.
    pub fn waypoint(
        area: (f64, f64),
        speed: (f64, f64),
        pause: Duration,
        duration: Duration,
        seed: u64,
    ) -> Self {
        let step = Duration::from_millis(100);
        let dt = step.as_secs_f64();
        let n = (duration.as_secs_f64() / dt).ceil() as usize + 2;
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x7761_7970_6f69_6e74);
        let draw = |rng: &mut Pcg64Mcg| Point {
            x: rng.random::<f64>() * area.0,
            y: rng.random::<f64>() * area.1,
        };
        let mut at = draw(&mut rng);
        let mut positions = Vec::with_capacity(n);
        while positions.len() < n {
            let to = draw(&mut rng);
            let v = if speed.1 > speed.0 {
                rng.random_range(speed.0..speed.1)
            } else {
                speed.0
            };
            let legs = (at.dist(to) / (v * dt)).ceil().max(1.0) as usize;
            for k in 0..legs {
                let w = k as f64 / legs as f64;
                positions.push(Point {
                    x: at.x + (to.x - at.x) * w,
                    y: at.y + (to.y - at.y) * w,
                });
            }
            at = to;
            let stay = (pause.as_secs_f64() / dt).round() as usize;
            positions.extend(std::iter::repeat_n(at, stay.max(1)));
        }
        positions.truncate(n.max(2));
        Mobility {
            step,
            positions,
            aps: Vec::new(),
        }
    }

    /// Position at time `t` (linear between samples).
    pub fn position(&self, t: Duration) -> Point {
        let f = t.as_secs_f64() / self.step.as_secs_f64();
        let i = (f.floor() as usize).min(self.positions.len() - 2);
        let w = (f - i as f64).clamp(0.0, 1.0);
        let (a, b) = (self.positions[i], self.positions[i + 1]);
        Point {
            x: a.x + (b.x - a.x) * w,
            y: a.y + (b.y - a.y) * w,
        }
    }

    pub fn access_points(&self) -> &[Point] {
        &self.aps
    }

    /// Distance to the nearest access point, and which one.
    pub fn nearest(&self, t: Duration) -> Option<(usize, f64)> {
        let p = self.position(t);
        self.aps
            .iter()
            .enumerate()
            .map(|(i, a)| (i, p.dist(*a)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straight_road_moves_at_speed() {
        let m = Mobility::new(
            &Route::Straight {
                start_m: -100.0,
                aps_m: vec![0.0],
                offset_m: 10.0,
            },
            10.0,
            Duration::from_secs(30),
            1,
        );
        assert!((m.position(Duration::from_secs(10)).x - 0.0).abs() < 1e-9);
        let (_, d) = m.nearest(Duration::from_secs(10)).unwrap();
        assert!((d - 10.0).abs() < 1e-9);
    }

    #[test]
    fn loop_comes_back_to_the_access_point() {
        // 2 km at 30 km/h: one lap every 240 s.
        let speed = 30.0 / 3.6;
        let m = Mobility::new(
            &Route::Loop {
                length_m: 2000.0,
                ap_at_m: 100.0,
                offset_m: 5.0,
            },
            speed,
            Duration::from_secs(600),
            1,
        );
        let near = |t: f64| m.nearest(Duration::from_secs_f64(t)).unwrap().1;
        let t_ap = 100.0 / speed;
        assert!(near(t_ap) < 6.0);
        assert!(near(t_ap + 240.0) < 6.0);
        assert!(near(t_ap + 120.0) > 500.0);
    }

    #[test]
    fn waypoints_stay_in_the_area_at_the_speed() {
        let m = Mobility::waypoint(
            (200.0, 100.0),
            (1.0, 2.0),
            Duration::from_secs(1),
            Duration::from_secs(300),
            5,
        );
        let mut moved = 0.0;
        for k in 1..3000 {
            let (a, b) = (
                m.position(Duration::from_millis(100 * (k - 1))),
                m.position(Duration::from_millis(100 * k)),
            );
            assert!((0.0..=200.0).contains(&b.x) && (0.0..=100.0).contains(&b.y));
            // At most 2 m/s (plus rounding of the last step of a leg).
            assert!(a.dist(b) <= 0.2 + 1e-9, "{a:?} {b:?}");
            moved += a.dist(b);
        }
        // Mostly moving: at least 1 m/s for more than half the time.
        assert!(moved > 150.0, "{moved}");
        let f = Mobility::fixed(Point { x: 3.0, y: 4.0 });
        assert_eq!(
            f.position(Duration::from_secs(1000)),
            Point { x: 3.0, y: 4.0 }
        );
    }

    #[test]
    fn grid_stays_on_the_streets_and_is_seeded() {
        let route = Route::Grid {
            blocks: 5,
            block_m: 200.0,
            rsus: 6,
        };
        let a = Mobility::new(&route, 10.0, Duration::from_secs(600), 7);
        let b = Mobility::new(&route, 10.0, Duration::from_secs(600), 7);
        let c = Mobility::new(&route, 10.0, Duration::from_secs(600), 8);
        assert_eq!(a.access_points().len(), 6);
        for k in 0..600 {
            let t = Duration::from_secs(k);
            let p = a.position(t);
            assert_eq!(p, b.position(t));
            // On a street: x or y is a multiple of the block length.
            let on = |v: f64| (v / 200.0 - (v / 200.0).round()).abs() < 1e-6;
            assert!(on(p.x) || on(p.y), "{p:?}");
            assert!((0.0..=1000.0).contains(&p.x) && (0.0..=1000.0).contains(&p.y));
        }
        assert_ne!(a.access_points(), c.access_points());
    }
}
