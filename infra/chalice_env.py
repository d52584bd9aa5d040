"""Copy the infra stack's outputs into a Chalice stage's environment variables.

    python infra/chalice_env.py --stage prod                      # reads stack ltm-prod
    python infra/chalice_env.py --stage prod --stack my-ltm
    aws cloudformation describe-stacks --stack-name ltm-prod \\
        --query 'Stacks[0].Outputs' > outputs.json
    python infra/chalice_env.py --stage prod --outputs outputs.json

Only the variables below are written, in ``.chalice/config.json`` under
``stages.<stage>.environment_variables``; everything else in the file is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".chalice" / "config.json"

# stack output -> the environment variable the app reads
OUTPUT_TO_ENV = {
    "TableName": "LTM_DYNAMODB_TABLE",
    "UserPoolId": "LTM_COGNITO_USER_POOL_ID",
    "UserPoolClientId": "LTM_COGNITO_CLIENT_ID",
    "CognitoDomain": "LTM_COGNITO_DOMAIN",
}


def outputs_from_stack(stack: str, region: str | None) -> list[dict[str, Any]]:
    import boto3

    cfn = boto3.client("cloudformation", region_name=region)
    return list(cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", []))


def apply(config: dict[str, Any], stage: str, outputs: list[dict[str, Any]]) -> dict[str, str]:
    """Set the stage's variables from ``outputs`` (as CloudFormation lists them); return them."""
    values = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    missing = [key for key in OUTPUT_TO_ENV if key not in values]
    if missing:
        raise SystemExit(f"the stack has no output {', '.join(missing)}: is it infra/ltm.yaml?")
    env = config.setdefault("stages", {}).setdefault(stage, {})
    variables = env.setdefault("environment_variables", {})
    changed = {OUTPUT_TO_ENV[key]: values[key] for key in OUTPUT_TO_ENV}
    variables.update(changed)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", required=True, help="Chalice stage (dev, prod)")
    parser.add_argument("--stack", help="CloudFormation stack name (default: ltm-<stage>)")
    parser.add_argument("--region", help="the stack's region (default: from the AWS config)")
    parser.add_argument("--outputs", type=Path, help="a JSON file of the stack's Outputs instead")
    parser.add_argument("--config", type=Path, default=CONFIG, help="the Chalice config to update")
    args = parser.parse_args(argv)
    if args.outputs:
        outputs = json.loads(args.outputs.read_text())
    else:
        outputs = outputs_from_stack(args.stack or f"ltm-{args.stage}", args.region)
    config = json.loads(args.config.read_text())
    changed = apply(config, args.stage, outputs)
    args.config.write_text(json.dumps(config, indent=2) + "\n")
    for name, value in changed.items():
        print(f"{args.stage}: {name}={value}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
