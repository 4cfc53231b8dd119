//! The lab's CSV files (`intervals.csv`, `samples.csv`, `rate-curve.csv`, `tables.csv`): RFC 4180
//! with a header line, as `headroom lab` writes them. A quoted field may hold commas, doubled
//! quotes and line breaks; every record must have as many fields as the header. Errors name the
//! file and the line the record starts on.

use std::path::{Path, PathBuf};

use crate::ReportError;

/// One record: its fields and the (1-based) line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

/// A parsed CSV file: the header's column names and the records after it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Csv {
    pub path: PathBuf,
    pub header: Vec<String>,
    pub records: Vec<Record>,
}

pub(crate) fn error(path: &Path, line: usize, message: impl Into<String>) -> ReportError {
    ReportError::Csv {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// Splits `text` into records of fields; blank lines are skipped. `#` lines are kept as
/// one-field records (tables.csv's titles) when `comments` is set.
pub(crate) fn records(text: &str, path: &Path, comments: bool) -> Result<Vec<Record>, ReportError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    loop {
        // Skip blank lines between records.
        while let Some(&c) = chars.peek() {
            match c {
                '\n' => {
                    line += 1;
                    chars.next();
                }
                '\r' => {
                    chars.next();
                }
                _ => break,
            }
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let start = line;
        if comments && chars.peek() == Some(&'#') {
            let mut s = String::new();
            for c in chars.by_ref() {
                if c == '\n' {
                    line += 1;
                    break;
                }
                s.push(c);
            }
            out.push(Record {
                line: start,
                fields: vec![s.trim_end_matches('\r').to_string()],
            });
            continue;
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false; // inside quotes
        let mut was_quoted = false; // this field started with a quote
        loop {
            let Some(c) = chars.next() else {
                if quoted {
                    return Err(error(path, start, "a quoted field is not closed"));
                }
                fields.push(std::mem::take(&mut field));
                break;
            };
            if quoted {
                match c {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => quoted = false,
                    '\n' => {
                        line += 1;
                        field.push(c);
                    }
                    c => field.push(c),
                }
                continue;
            }
            match c {
                ',' => {
                    fields.push(std::mem::take(&mut field));
                    was_quoted = false;
                }
                '"' if field.is_empty() && !was_quoted => {
                    quoted = true;
                    was_quoted = true;
                }
                '"' => {
                    return Err(error(
                        path,
                        line,
                        "a quote inside an unquoted field (or after a closing quote)",
                    ))
                }
                '\r' if chars.peek() == Some(&'\n') => {}
                '\n' => {
                    line += 1;
                    fields.push(std::mem::take(&mut field));
                    break;
                }
                c if was_quoted => {
                    return Err(error(
                        path,
                        line,
                        format!("'{c}' after a closing quote (expected a comma)"),
                    ))
                }
                c => field.push(c),
            }
        }
        out.push(Record {
            line: start,
            fields,
        });
    }
}

impl Csv {
    /// Parses a CSV file with a header line; every record must have the header's width.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Csv, ReportError> {
        let mut recs = records(text, path, false)?.into_iter();
        let Some(header) = recs.next() else {
            return Err(error(path, 1, "empty file: no header line"));
        };
        let records: Vec<Record> = recs.collect();
        for r in &records {
            if r.fields.len() != header.fields.len() {
                return Err(error(
                    path,
                    r.line,
                    format!(
                        "{} fields where the header has {}",
                        r.fields.len(),
                        header.fields.len()
                    ),
                ));
            }
        }
        Ok(Csv {
            path: path.to_path_buf(),
            header: header.fields,
            records,
        })
    }

    /// The index of column `name`.
    pub(crate) fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The factor columns: those before `repetition` (every lab CSV starts with them).
    pub(crate) fn factor_cols(&self) -> usize {
        self.col("repetition").unwrap_or(0)
    }

    /// The number in column `col` of `r`: None when the column is missing or the field empty;
    /// an error naming the line when it is not a number.
    pub(crate) fn num(&self, r: &Record, col: Option<usize>) -> Result<Option<f64>, ReportError> {
        let Some(i) = col else { return Ok(None) };
        let s = r.fields[i].trim();
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<f64>().map(Some).map_err(|_| {
            error(
                &self.path,
                r.line,
                format!("column {}: '{s}' is not a number", self.header[i]),
            )
        })
    }

    /// The boolean in column `col` of `r` (`true`/`false`), None when missing or empty.
    pub(crate) fn boolean(
        &self,
        r: &Record,
        col: Option<usize>,
    ) -> Result<Option<bool>, ReportError> {
        let Some(i) = col else { return Ok(None) };
        match r.fields[i].trim() {
            "" => Ok(None),
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            s => Err(error(
                &self.path,
                r.line,
                format!("column {}: '{s}' is not true or false", self.header[i]),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> PathBuf {
        PathBuf::from("x.csv")
    }

    #[test]
    fn quoted_fields_and_line_numbers() {
        let text = "a,b,c\n1,\"x, y\",\"say \"\"hi\"\"\"\n\n2,\"two\nlines\",\r\n3,,z\n";
        let c = Csv::parse(text, &p()).unwrap();
        assert_eq!(c.header, ["a", "b", "c"]);
        assert_eq!(c.records.len(), 3);
        assert_eq!(c.records[0].fields, ["1", "x, y", "say \"hi\""]);
        assert_eq!(c.records[0].line, 2);
        assert_eq!(c.records[1].fields, ["2", "two\nlines", ""]);
        assert_eq!(c.records[1].line, 4);
        assert_eq!(c.records[2].line, 6);
        assert_eq!(c.records[2].fields, ["3", "", "z"]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = Csv::parse("a,b\n1,2\n3\n", &p()).unwrap_err();
        assert!(matches!(e, ReportError::Csv { line: 3, .. }), "{e:?}");
        assert_eq!(e.to_string(), "x.csv:3: 1 fields where the header has 2");
        let e = Csv::parse("a,b\n1,2\n3,\"open\n", &p()).unwrap_err();
        assert!(matches!(e, ReportError::Csv { line: 3, .. }), "{e:?}");
        let e = Csv::parse("a,b\n1,x\"y\n", &p()).unwrap_err();
        assert!(matches!(e, ReportError::Csv { line: 2, .. }), "{e:?}");
        let c = Csv::parse("a,b\n1,x\n", &p()).unwrap();
        let e = c.num(&c.records[0], c.col("b")).unwrap_err();
        assert_eq!(e.to_string(), "x.csv:2: column b: 'x' is not a number");
        assert_eq!(c.num(&c.records[0], c.col("a")).unwrap(), Some(1.0));
        assert_eq!(c.num(&c.records[0], c.col("zz")).unwrap(), None);
        assert!(Csv::parse("", &p()).is_err());
    }

    #[test]
    fn comment_lines_when_asked() {
        let r = records("# title, with comma\na,b\n1,2\n", &p(), true).unwrap();
        assert_eq!(r[0].fields, ["# title, with comma"]);
        assert_eq!(r[1].fields, ["a", "b"]);
        assert_eq!(r[2].line, 3);
    }
}
