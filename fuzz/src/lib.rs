//! Shared helpers of the fuzz targets.

/// Splits `data` into pieces whose lengths cycle through `lens`.
pub struct Pieces<'a> {
    pub data: &'a [u8],
    pub lens: &'a [u8],
    pub i: usize,
    pub done: bool,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done {
            return None;
        }
        if self.data.is_empty() || self.lens.iter().all(|&l| l == 0) {
            self.done = true;
            return Some(self.data);
        }
        let len = usize::from(self.lens[self.i % self.lens.len()]).min(self.data.len());
        self.i += 1;
        let (piece, rest) = self.data.split_at(len);
        self.data = rest;
        Some(piece)
    }
}
