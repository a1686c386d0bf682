// Light or dark: the system's choice (prefers-color-scheme) until the reader picks one with the
// toggle, which is kept in localStorage and set as `data-theme` on <html> (style.css).

const KEY = 'ringcast-theme';

function stored() {
  try {
    const value = localStorage.getItem(KEY);
    return value === 'light' || value === 'dark' ? value : '';
  } catch {
    return '';
  }
}

/** The theme shown now: the reader's choice, else the system's. */
export function currentTheme() {
  return stored() || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
}

function apply(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

/** Applies the kept choice and makes `button` switch between the two themes. */
export function bindThemeToggle(button) {
  apply(stored());
  const label = () => {
    const dark = currentTheme() === 'dark';
    button.setAttribute('aria-pressed', String(dark));
    button.textContent = 'Dark theme';
    button.title = dark ? 'Switch to the light theme' : 'Switch to the dark theme';
  };
  label();
  button.addEventListener('click', () => {
    const next = currentTheme() === 'dark' ? 'light' : 'dark';
    try {
      localStorage.setItem(KEY, next);
    } catch { /* private mode: the choice lasts for this page */ }
    apply(next);
    label();
  });
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', label);
}
