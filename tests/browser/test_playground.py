"""The playground in a real headless browser: open the pull request, comment as a user, see Spark answer,
commit its suggestion.

The whole stack runs as ``spark sandbox`` runs it (the local GitHub and model, Redis, the receiver, a
``spark worker`` process). A screenshot of the answered conversation is kept in ``artifacts/``.
"""

from __future__ import annotations

from pathlib import Path

from bot.settings import Settings
from sandbox.scenario import parse
from sandbox.stack import start_stack

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCENARIO = """
name: browser-playground
description: The playground's repository, with a scripted answer to any question.
repository:
  owner: acme
  name: playground
  files: {README.md: "# playground\\n"}
pull_request:
  title: Try Spark
  body: Says **hello**.
  author: octocat
  head_branch: try-spark
  files: {hello.py: "print('hello')\\n"}
collaborators: {octocat: admin}
events:
  - wait: 0
model:
  replies:
    - name: ask
      command: ask
      reply: "`hello.py` prints hello once."
    - name: review
      path: hello.py
      reply: |
        ### FINDING: low: greet the world
        The greeting names nobody; say whom it greets.
        <<<<<<< SEARCH
        print('hello')
        =======
        print('hello, world')
        >>>>>>> REPLACE
"""


def test_comment_as_a_user_on_the_playground_page_and_see_spark_answer(
    browser: object, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.wait import WebDriverWait

    assert isinstance(browser, WebDriver)
    with start_stack(parse(SCENARIO), Settings.load({}, env_file=None), tmp_path) as stack:
        pull_url = stack.github.pull(stack.scene.repo, stack.scene.pr_number)["html_url"]
        browser.get(pull_url)
        assert browser.title == "Try Spark · acme/playground#1"
        description = browser.find_element(By.ID, "description")
        assert description.find_element(By.TAG_NAME, "strong").text == "hello"

        who = browser.find_element(By.ID, "as")
        assert who.get_attribute("value") == "octocat"  # the pull request's author, unless chosen
        who.clear()
        who.send_keys("bob")
        browser.find_element(By.ID, "comment-body").send_keys("/spark ask what does hello.py print?")
        browser.find_element(By.ID, "comment-submit").click()
        WebDriverWait(browser, 20).until(lambda b: "#issuecomment-" in b.current_url)
        [asked] = stack.github.issue_comments(stack.scene.repo, 1)
        assert asked["user"]["login"] == "bob"
        mine = browser.find_element(By.ID, f"issuecomment-{asked['id']}")
        assert "bob commented" in mine.find_element(By.TAG_NAME, "header").text

        # No reload: the page brings Spark's answer in as it is posted, rendered as GitHub renders it.
        def answer(b: WebDriver) -> object:
            found = b.find_elements(By.CSS_SELECTOR, "#live .box.bot")
            return found[0] if found else False

        posted = WebDriverWait(browser, 60).until(answer)
        assert "spark[bot] commented" in posted.find_element(By.TAG_NAME, "header").text
        assert posted.find_element(By.CSS_SELECTOR, ".body code").text == "hello.py"
        # Spark's raw HTML shows as on GitHub: its timings in <sub>, its marker comment hidden.
        assert posted.find_element(By.CSS_SELECTOR, ".body sub").text.startswith("queue ")
        assert "prints hello once." in posted.text and "spark:reply" not in posted.text
        WebDriverWait(browser, 10).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, f"#issuecomment-{asked['id']} [data-reaction=eyes]")
        )
        ARTIFACTS.mkdir(exist_ok=True)
        assert browser.save_screenshot(str(ARTIFACTS / "playground.png"))

        # A review as the author, then its suggestion committed with GitHub's button.
        who = browser.find_element(By.ID, "as")
        who.clear()
        who.send_keys("octocat")
        browser.find_element(By.ID, "comment-body").send_keys("/spark review")
        browser.find_element(By.ID, "comment-submit").click()
        button = WebDriverWait(browser, 60).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, ".suggestion form.button button")
        )[0]
        assert button.text == "Commit suggestion"
        button.click()
        WebDriverWait(browser, 20).until(lambda b: "#commit-" in b.current_url)
        commits = browser.find_elements(By.CSS_SELECTOR, "#commits li")
        assert len(commits) == 2 and "octocat" in commits[-1].text
        assert stack.github.file_at("acme/playground", "try-spark", "hello.py") == "print('hello, world')\n"
        assert stack.model is not None
        assert [r.script for r in stack.model.requests][:2] == ["ask", "review"]
