// Modal dialogs: a confirmation and the token prompt, both on <dialog>.
import { h } from "./dom";

export function confirmAction(opts: {
  title: string;
  message: string;
  confirm: string;
  danger?: boolean;
}): Promise<boolean> {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "dialog", "data-testid": "confirm-dialog" },
      h("h2", {}, opts.title),
      h("p", { class: "dialog-message", "data-testid": "confirm-message" }, opts.message),
    );
    const done = (answer: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const cancel = h("button", { class: "btn", type: "button", "data-testid": "confirm-cancel" }, "Cancel");
    const ok = h(
      "button",
      { class: opts.danger ? "btn btn-danger" : "btn btn-primary", type: "button", "data-testid": "confirm-ok" },
      opts.confirm,
    );
    cancel.addEventListener("click", () => done(false));
    ok.addEventListener("click", () => done(true));
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(false);
    });
    dialog.append(h("div", { class: "dialog-actions" }, cancel, ok));
    document.body.append(dialog);
    dialog.showModal();
    ok.focus();
  });
}

export function promptToken(reason: string): Promise<string | null> {
  return new Promise((resolve) => {
    const input = h("input", {
      class: "input input-wide",
      type: "password",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "token",
      "data-testid": "token-input",
    });
    const form = h(
      "form",
      { method: "dialog" },
      h("h2", {}, "Admin token"),
      h("p", { class: "dialog-message" }, reason),
      h(
        "p",
        { class: "dialog-hint" },
        "It is kept in this tab only (session storage) and sent as a bearer token with each change.",
      ),
      input,
    );
    const dialog = h("dialog", { class: "dialog", "data-testid": "token-dialog" }, form);
    const done = (value: string | null) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const cancel = h("button", { class: "btn", type: "button" }, "Cancel");
    const ok = h("button", { class: "btn btn-primary", type: "submit", "data-testid": "token-ok" }, "Use token");
    cancel.addEventListener("click", () => done(null));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const value = input.value.trim();
      if (value) done(value);
      else input.focus();
    });
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(null);
    });
    form.append(h("div", { class: "dialog-actions" }, cancel, ok));
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
}

let toastHost: HTMLElement | null = null;

export function toast(message: string, kind: "ok" | "error" = "ok"): void {
  if (!toastHost) {
    toastHost = h("div", { class: "toasts", "aria-live": "polite" });
    document.body.append(toastHost);
  }
  const el = h("div", { class: `toast toast-${kind}`, "data-testid": "toast" }, message);
  toastHost.append(el);
  setTimeout(() => el.classList.add("toast-leaving"), kind === "error" ? 6000 : 3500);
  setTimeout(() => el.remove(), kind === "error" ? 6400 : 3900);
}
